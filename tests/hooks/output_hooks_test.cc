// LoggingTensorHook, StepCounterHook and ProfilerHook: what they print and write.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cohort/hooks/logging_tensor_hook.h"
#include "cohort/hooks/profiler_hook.h"
#include "cohort/hooks/step_counter_hook.h"
#include "cohort/hooks/stop_at_step_hook.h"
#include "hooks/hook_test_support.h"

namespace cohort {
namespace {

using test::LocalTraining;

using test::with_hooks;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("LoggingTensorHook prints the tensors in order every N runs, with the time between lines") {
  LocalTraining t;
  std::ostringstream out;
  auto hook = std::make_shared<LoggingTensorHook>(
      LoggingTensorHookOptions{.tensors = {"loss", "global_step"}, .every_n_iter = 3, .out = &out});
  {
    MonitoredSession session(t.trainer, with_hooks({hook, StopAtStepHook::last(7)}));
    test::train(session);
  }
  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);  // runs 0, 3, 6
  CHECK(std::regex_match(lines[0], std::regex(R"(loss = [0-9.e+-]+, global_step = 1)")));
  CHECK(std::regex_match(lines[1], std::regex(R"(loss = [0-9.e+-]+, global_step = 4 \([0-9]+\.[0-9]{3} sec\))")));
  CHECK(std::regex_match(lines[2], std::regex(R"(loss = [0-9.e+-]+, global_step = 7 \([0-9]+\.[0-9]{3} sec\))")));
}

TEST_CASE("LoggingTensorHook with a formatter, and at the end only") {
  LocalTraining t;
  std::ostringstream out;
  auto formatted = std::make_shared<LoggingTensorHook>(LoggingTensorHookOptions{
      .tensors = {"global_step", "accuracy"},
      .every_n_iter = 2,
      .formatter = [](const std::map<std::string, double>& v) {
        return "step " + std::to_string(static_cast<int>(v.at("global_step"))) + " of " + std::to_string(v.size());
      },
      .out = &out});
  std::ostringstream end_out;
  auto at_end = std::make_shared<LoggingTensorHook>(
      LoggingTensorHookOptions{.tensors = {"global_step"}, .at_end = true, .out = &end_out});
  {
    MonitoredSession session(t.trainer, with_hooks({formatted, at_end, StopAtStepHook::last(4)}));
    test::train(session);
    CHECK(end_out.str().empty());
  }
  CHECK(lines_of(out.str()) == std::vector<std::string>{"step 1 of 2", "step 3 of 2"});
  CHECK(end_out.str() == "global_step = 4\n");

  CHECK_THROWS_AS(LoggingTensorHook({.tensors = {}, .every_n_iter = 1}), InvalidArgument);
  CHECK_THROWS_AS(LoggingTensorHook({.tensors = {"loss"}}), InvalidArgument);  // no cadence, no at_end
  CHECK_THROWS_AS(LoggingTensorHook({.tensors = {"loss"}, .every_n_iter = 1, .every_n_secs = 1}), InvalidArgument);
}

TEST_CASE("StepCounterHook prints global steps and images per second every N global steps") {
  LocalTraining t;
  std::ostringstream out;
  auto hook = std::make_shared<StepCounterHook>(StepCounterHookOptions{.every_n_steps = 2, .out = &out});
  {
    MonitoredSession session(t.trainer, with_hooks({hook, StopAtStepHook::last(6)}));
    test::train(session);
  }
  // Triggers at global steps 1 (the start, nothing to report), 3 and 5.
  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines)
    CHECK(std::regex_match(line, std::regex(R"(global_step/sec: [0-9.e+]+, examples/sec: [0-9]+)")));
  REQUIRE(hook->steps_per_sec().has_value());
  CHECK(*hook->steps_per_sec() > 0);
  // Local mode: one batch per global step.
  CHECK(*hook->examples_per_sec() == doctest::Approx(*hook->steps_per_sec() * test::kBatch));
  // One cadence, or none for every 100 steps; two, or a negative one, are refused.
  CHECK_NOTHROW(StepCounterHook({.every_n_secs = 10}));
  CHECK_NOTHROW(StepCounterHook(StepCounterHookOptions{}));
  CHECK_THROWS_AS(StepCounterHook({.every_n_steps = 2, .every_n_secs = 10}), InvalidArgument);
  CHECK_THROWS_AS(StepCounterHook({.every_n_steps = -1}), InvalidArgument);
}

TEST_CASE("ProfilerHook writes a Chrome trace with one complete event per phase of the recorded steps") {
  LocalTraining t;
  test::TempDir dir("profiler");
  auto hook = std::make_shared<ProfilerHook>(
      ProfilerHookOptions{.every_n_steps = 2, .output_file = dir.str() + "/sub/trace.json"});
  {
    MonitoredSession session(t.trainer, with_hooks({hook, StopAtStepHook::last(7)}));
    CHECK(hook->path() == dir.str() + "/sub/trace.worker0.json");
    test::train(session);
  }
  // The first run (global step 1) is not recorded but starts the count: then steps 3, 5, 7.
  CHECK(hook->recorded_steps() == 3);
  std::ifstream in(hook->path());
  REQUIRE(in.good());
  const nlohmann::json trace = nlohmann::json::parse(in);
  REQUIRE(trace.contains("traceEvents"));
  std::multiset<std::string> names;
  std::set<std::int64_t> steps;
  std::map<std::string, int> tids;
  int metadata = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M") {
      ++metadata;
      continue;
    }
    CHECK(event["ph"] == "X");
    CHECK(event["pid"] == 0);
    CHECK(event["ts"].get<double>() >= 0);
    CHECK(event["dur"].get<double>() >= 0);
    const std::string name = event["name"];
    names.insert(name);
    steps.insert(event["args"]["global_step"].get<std::int64_t>());
    const int tid = event["tid"];
    if (tids.count(name)) CHECK(tids[name] == tid);  // one track per phase kind
    tids[name] = tid;
  }
  CHECK(steps == std::set<std::int64_t>{3, 5, 7});
  for (const char* phase : {"pull", "forward_backward", "push", "wait"}) CHECK(names.count(phase) == 3);
  CHECK(tids.size() == 4);
  CHECK(metadata == 5);  // process_name and four thread_name
}

TEST_CASE("ProfilerHook: a trace that cannot be written is found as the session is created") {
  LocalTraining t;
  test::TempDir dir("profiler_unwritable");
  std::ofstream(dir.str() + "/file") << "a file, not a directory\n";
  auto hook = std::make_shared<ProfilerHook>(
      ProfilerHookOptions{.every_n_steps = 1, .output_file = dir.str() + "/file/trace.json"});
  const std::string said = "ProfilerHook: cannot write " + dir.str() + "/file/trace.worker0.json.tmp";
  CHECK_THROWS_WITH_AS(MonitoredSession(t.trainer, with_hooks({hook, StopAtStepHook::last(3)})),
                       doctest::Contains(said.c_str()), Error);
}

TEST_CASE("ProfilerHook: a directory for output_file is refused, naming it") {
  test::TempDir dir("profiler_directory");
  for (const std::string& given : {dir.str(), dir.str() + "/"})
    CHECK_THROWS_WITH_AS(ProfilerHook(ProfilerHookOptions{.output_file = given}),
                         ("ProfilerHook: output_file '" + given + "' is a directory; name a file in it "
                          "(each worker writes <stem>.worker<N><ext>)").c_str(),
                         InvalidArgument);
  // It counts steps alone: its error speaks of them, not of seconds.
  CHECK_THROWS_WITH_AS(ProfilerHook(ProfilerHookOptions{.every_n_steps = 0, .output_file = dir.str() + "/t.json"}),
                       "ProfilerHook: every_n_steps must be >= 1, got 0", InvalidArgument);
}

TEST_CASE("ProfilerHook: a run that fails leaves its trace, written as the hook is destroyed") {
  LocalTraining t;
  test::TempDir dir("profiler_failed_run");
  auto hook = std::make_shared<ProfilerHook>(
      ProfilerHookOptions{.every_n_steps = 1, .output_file = dir.str() + "/trace.json"});
  const std::string path = dir.str() + "/trace.worker0.json";
  struct FailAtFifth : SessionRunHook {
    int runs = 0;
    void after_run(RunContext&, const SessionRunValues&) override {
      if (++runs == 5) throw Error("failed on purpose");
    }
  };
  {
    MonitoredSession session(t.trainer, with_hooks({hook, std::make_shared<FailAtFifth>(),
                                                    StopAtStepHook::last(100)}));
    for (int i = 0; i < 4; ++i) session.run();
    CHECK_THROWS_AS(session.run(), Error);  // the error skips end(): no trace written there
  }
  CHECK(hook->recorded_steps() == 4);  // the first run is skipped
  hook.reset();
  std::ifstream in(path);
  REQUIRE(in.good());
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::set<std::int64_t> steps;
  for (const auto& event : trace["traceEvents"])
    if (event["ph"] == "X") steps.insert(event["args"]["global_step"].get<std::int64_t>());
  CHECK(steps == std::set<std::int64_t>{2, 3, 4, 5});
}

}  // namespace cohort
