// The hook protocol on a real local session: call order, fetches, stop requests, errors.
#include <doctest/doctest.h>

#include "cohort/hooks/stop_at_step_hook.h"
#include "hooks/hook_test_support.h"
#include "hooks/recording_hook.h"

namespace cohort {
namespace {

using test::LocalTraining;
using test::RecordingHook;

// Requests a stop after `n` runs.
class StopAfter : public SessionRunHook {
 public:
  explicit StopAfter(int n) : n_(n) {}
  void after_run(RunContext& context, const SessionRunValues&) override {
    if (++runs_ >= n_) context.request_stop();
  }

 private:
  int n_;
  int runs_ = 0;
};

// Asks the session itself to stop, during its n-th step: what a ported TensorFlow hook does with
// run_context.session's request_stop.
class SessionStopAfter : public SessionRunHook {
 public:
  explicit SessionStopAfter(int n) : n_(n) {}
  void after_create_session(MonitoredSession& session) override { session_ = &session; }
  void after_run(RunContext&, const SessionRunValues&) override {
    if (++runs_ >= n_) session_->request_stop();
  }

 private:
  int n_;
  int runs_ = 0;
  MonitoredSession* session_ = nullptr;
};

class ThrowAt : public SessionRunHook {
 public:
  explicit ThrowAt(int n) : n_(n) {}
  void after_run(RunContext&, const SessionRunValues&) override {
    if (++runs_ == n_) throw Error("hook failed on purpose");
  }

 private:
  int n_;
  int runs_ = 0;
};

class ThrowInEnd : public SessionRunHook {
 public:
  explicit ThrowInEnd(std::string what) : what_(std::move(what)) {}
  void end(MonitoredSession&) override { throw Error(what_); }

 private:
  std::string what_;
};

}  // namespace

TEST_CASE("hooks see begin, after_create_session, (before_run, after_run) x N, end, with the fetches they asked for") {
  LocalTraining t;
  auto first = std::make_shared<RecordingHook>();
  auto second = std::make_shared<RecordingHook>();
  constexpr int kSteps = 6;
  {
    MonitoredSessionOptions options;
    options.hooks = {first, std::make_shared<StopAfter>(kSteps)};
    options.chief_only_hooks = {second};
    options.stop_on_signals = false;
    MonitoredSession session(t.trainer, options);
    CHECK(first->events == std::vector<std::string>{"begin", "after_create_session"});
    int runs = 0;
    while (!session.should_stop()) {
      const SessionRunValues values = session.run({"loss", "global_step"});
      ++runs;
      CHECK(values.all().size() == 2);
      CHECK(values.get("global_step") == runs);
    }
    CHECK(runs == kSteps);
    CHECK(first->events.back() == "after_run");
    session.close();
    session.close();  // idempotent: end() only once
  }
  CHECK(first->events == test::expected_events(kSteps));
  CHECK(second->events == test::expected_events(kSteps));  // local sessions are the chief
  CHECK(first->mismatches == 0);
  CHECK(second->mismatches == 0);
  CHECK(first->chief_seen);
  CHECK(first->last_global_step == kSteps);
}

TEST_CASE("an exception from a hook leaves run(), stops the session, and skips end()") {
  LocalTraining t;
  auto recorder = std::make_shared<RecordingHook>();
  MonitoredSessionOptions options;
  options.hooks = {recorder, std::make_shared<ThrowAt>(2)};
  options.stop_on_signals = false;
  MonitoredSession session(t.trainer, options);
  session.run();
  CHECK_THROWS_WITH_AS(session.run(), "hook failed on purpose", Error);
  CHECK(session.should_stop());
  session.close();
  CHECK(recorder->events == std::vector<std::string>{"begin", "after_create_session", "before_run", "after_run",
                                                     "before_run", "after_run"});
}

TEST_CASE("close() runs every hook's end() though one threw, leaves training, then throws the first error") {
  LocalTraining t;
  auto before = std::make_shared<RecordingHook>();
  auto after = std::make_shared<RecordingHook>();
  auto chief_only = std::make_shared<RecordingHook>();
  MonitoredSessionOptions options;
  options.hooks = {before, std::make_shared<ThrowInEnd>("first end() failed"), after,
                   std::make_shared<ThrowInEnd>("second end() failed")};
  options.chief_only_hooks = {chief_only};
  options.stop_on_signals = false;
  MonitoredSession session(t.trainer, options);
  session.run();
  CHECK_THROWS_WITH_AS(session.close(), "first end() failed", Error);
  for (const auto& hook : {before, after, chief_only}) CHECK(hook->events.back() == "end");
  session.close();  // closed: nothing again
}

TEST_CASE("a trainer steps between start() and finish(); a new session may start it again") {
  LocalTraining t;
  CHECK_THROWS_WITH_AS(t.trainer.step(), doctest::Contains("has not started"), InvalidArgument);
  MonitoredSessionOptions options;
  options.stop_on_signals = false;
  {
    MonitoredSession session(t.trainer, options);
    CHECK_THROWS_WITH_AS(t.trainer.start(), doctest::Contains("is training already"), InvalidArgument);
    session.run();
    session.close();
  }
  CHECK_THROWS_WITH_AS(t.trainer.step(), doctest::Contains("has finished"), InvalidArgument);
  MonitoredSession again(t.trainer, options);  // local mode: starts again, from the seed
  CHECK(again.run({"global_step"}).get("global_step") == 1);
}

TEST_CASE("a second session without a checkpoint starts afresh: variables, optimizer slots and data") {
  Graph graph;
  OptimizerOptions momentum;
  momentum.name = "momentum";
  momentum.learning_rate.base = 0.05;
  Trainer trainer(nullptr, graph, [](Graph& g) { return mlp(g, {8}); }, data::synthetic(40, 5),
                  Optimizer::create(momentum), test::trainer_options());  // 5 batches an epoch
  const auto losses = [&] {
    MonitoredSession session(trainer, test::with_hooks({}));
    std::vector<double> seen;
    for (int i = 0; i < 7; ++i) seen.push_back(session.run({"loss"}).get("loss"));
    session.close();
    return seen;
  };
  const std::vector<double> first = losses();
  CHECK(losses() == first);
}

TEST_CASE("is_chief must name the chief: worker 0") {
  LocalTraining t;
  MonitoredSessionOptions options;
  options.is_chief = false;
  options.stop_on_signals = false;
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, options),
                       "MonitoredSession: is_chief = false, but this replica is worker 0 of 1, and the chief "
                       "is worker 0: pass .is_chief = server.is_chief()",
                       InvalidArgument);
}

TEST_CASE("a hook failing as the session is created leaves training: the trainer may start again") {
  struct FailingHook : SessionRunHook {
    void after_create_session(MonitoredSession&) override { throw Error("cannot open the trace file"); }
  };
  LocalTraining t;
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, test::with_hooks({std::make_shared<FailingHook>()})),
                       "cannot open the trace file", Error);
  CHECK_THROWS_WITH_AS(t.trainer.step(), doctest::Contains("has finished"), InvalidArgument);
  MonitoredSession session(t.trainer, test::with_hooks({}));
  CHECK(session.run({"global_step"}).get("global_step") == 1);
}

TEST_CASE("an unknown fetch is an InvalidArgument naming it") {
  LocalTraining t;
  MonitoredSessionOptions options;
  options.stop_on_signals = false;
  MonitoredSession session(t.trainer, options);
  CHECK_THROWS_AS(session.run({"no_such_value"}), InvalidArgument);
}

TEST_CASE("the session's own request_stop during a step ends training after that step") {
  LocalTraining t;
  MonitoredSessionOptions options;
  options.hooks = {std::make_shared<SessionStopAfter>(4)};
  options.stop_on_signals = false;
  MonitoredSession session(t.trainer, options);
  int runs = 0;
  while (!session.should_stop() && runs < 100) session.run(), ++runs;
  CHECK(runs == 4);
  CHECK(session.global_step() == 4);
}

}  // namespace cohort
