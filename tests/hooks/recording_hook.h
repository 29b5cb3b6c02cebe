#pragma once
// A hook that records every call it gets, and checks that after_run receives exactly the
// fetches its before_run asked for.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/train/session.h"

namespace cohort::test {

class RecordingHook : public SessionRunHook {
 public:
  void begin() override { events.push_back("begin"); }
  void after_create_session(MonitoredSession& session) override {
    events.push_back("after_create_session");
    chief_seen = session.is_chief();
  }
  SessionRunArgs before_run(RunContext&) override {
    events.push_back("before_run");
    // A different set of names each step, including none.
    static const std::vector<std::vector<std::string>> kAsks{
        {"loss"}, {}, {"global_step", "accuracy"}, {"learning_rate", "examples", "step_seconds", "gradient_applied"}};
    last_asked = kAsks[asks++ % kAsks.size()];
    return {last_asked};
  }
  void after_run(RunContext& context, const SessionRunValues& values) override {
    events.push_back("after_run");
    std::vector<std::string> got;
    for (const auto& [name, value] : values.all()) got.push_back(name);
    std::vector<std::string> want = last_asked;
    std::sort(want.begin(), want.end());
    if (got != want) mismatches++;
    last_global_step = context.session().global_step();
    if (values.has("global_step") && values.get("global_step") != static_cast<double>(last_global_step)) mismatches++;
  }
  void end(MonitoredSession&) override { events.push_back("end"); }

  std::vector<std::string> events;
  std::vector<std::string> last_asked;
  std::size_t asks = 0;
  int mismatches = 0;
  bool chief_seen = false;
  std::int64_t last_global_step = -1;
};

/// The events a hook should see over `steps` runs.
inline std::vector<std::string> expected_events(int steps) {
  std::vector<std::string> events{"begin", "after_create_session"};
  for (int i = 0; i < steps; ++i) {
    events.push_back("before_run");
    events.push_back("after_run");
  }
  events.push_back("end");
  return events;
}

}  // namespace cohort::test
