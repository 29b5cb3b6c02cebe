#include "cohort/hooks/logging_tensor_hook.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <utility>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

// With at_end alone there is no cadence; the timer still wants one, and is never consulted.
SecondOrStepTimer make_timer(const LoggingTensorHookOptions& options, bool only_at_end) {
  if (only_at_end) return SecondOrStepTimer(1, 0);
  return SecondOrStepTimer(options.every_n_iter, options.every_n_secs, "LoggingTensorHook");
}

}  // namespace

LoggingTensorHook::LoggingTensorHook(LoggingTensorHookOptions options)
    : options_(std::move(options)),
      timer_(make_timer(options_, options_.at_end && options_.every_n_iter == 0 && options_.every_n_secs == 0)),
      only_at_end_(options_.at_end && options_.every_n_iter == 0 && options_.every_n_secs == 0) {
  if (options_.tensors.empty()) throw InvalidArgument("LoggingTensorHook: no tensors to log");
}

void LoggingTensorHook::begin() {
  timer_.reset();
  iterations_ = 0;
  last_.clear();
}

SessionRunArgs LoggingTensorHook::before_run(RunContext&) {
  should_trigger_ = !only_at_end_ && timer_.should_trigger_for_step(iterations_);
  if (should_trigger_ || options_.at_end) return {options_.tensors};
  return {};
}

void LoggingTensorHook::after_run(RunContext&, const SessionRunValues& values) {
  if (should_trigger_ || options_.at_end) last_ = values.all();
  if (should_trigger_) log(last_);
  ++iterations_;
}

void LoggingTensorHook::end(MonitoredSession&) {
  if (options_.at_end && !last_.empty()) log(last_);
}

void LoggingTensorHook::log(const std::map<std::string, double>& values) {
  const auto elapsed = timer_.update_last_triggered_step(iterations_);
  std::ostringstream line;
  if (options_.formatter) {
    line << options_.formatter(values);
  } else {
    for (std::size_t i = 0; i < options_.tensors.size(); ++i) {
      const auto it = values.find(options_.tensors[i]);
      line << (i ? ", " : "") << options_.tensors[i] << " = ";
      if (it != values.end()) line << it->second; else line << "?";
    }
    if (elapsed) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, " (%.3f sec)", elapsed->seconds);
      line << seconds;
    }
  }
  std::ostream& out = options_.out ? *options_.out : std::cout;
  out << line.str() << std::endl;  // flushed: lines from several ranks should appear as they happen
}

}  // namespace cohort
