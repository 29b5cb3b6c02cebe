#include "cohort/hooks/profiler_hook.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

constexpr std::chrono::seconds kWriteInterval{30};

std::string worker_path(const std::string& file, int worker) {
  std::filesystem::path path(file);
  const std::string stem = path.stem().string() + ".worker" + std::to_string(worker);
  return path.replace_filename(stem + path.extension().string()).string();
}

// The timer's own error names seconds too, which this hook has none of.
std::int64_t checked_every_n_steps(std::int64_t steps) {
  if (steps < 1) throw InvalidArgument("ProfilerHook: every_n_steps must be >= 1, got " + std::to_string(steps));
  return steps;
}

}  // namespace

ProfilerHook::ProfilerHook(ProfilerHookOptions options)
    : options_(std::move(options)), timer_(checked_every_n_steps(options_.every_n_steps), 0, "ProfilerHook") {
  if (options_.output_file.empty()) throw InvalidArgument("ProfilerHook: output_file is empty");
  std::error_code ec;
  if (!std::filesystem::path(options_.output_file).has_filename() ||
      std::filesystem::is_directory(options_.output_file, ec))
    throw InvalidArgument("ProfilerHook: output_file '" + options_.output_file +
                          "' is a directory; name a file in it (each worker writes <stem>.worker<N><ext>)");
  if (options_.max_steps < 1)
    throw InvalidArgument("ProfilerHook: max_steps must be >= 1, got " + std::to_string(options_.max_steps));
}

ProfilerHook::~ProfilerHook() {
  if (recorded_ == written_) return;
  try {
    write();
  } catch (...) {  // destructors do not throw; the file was writable at the start
  }
}

void ProfilerHook::begin() {
  // A new session: its own trace (the file is rewritten from its start), once the last one's
  // steps are written (a failed session's end() never ran).
  if (recorded_ != written_ && !path_.empty()) {
    try {
      write();
    } catch (...) {  // its file was writable when it began; this session finds out for itself
    }
  }
  timer_.reset();
  first_run_ = true;
  traces_.clear();
  recorded_ = written_ = 0;
}

void ProfilerHook::after_create_session(MonitoredSession& session) {
  worker_ = session.worker_index();
  path_ = worker_path(options_.output_file, worker_);
  write();  // an empty trace: a file that cannot be written is said now, not after the run
  last_write_ = std::chrono::steady_clock::now();
}

SessionRunArgs ProfilerHook::before_run(RunContext&) { return {{"global_step"}}; }

void ProfilerHook::after_run(RunContext& context, const SessionRunValues& values) {
  const auto step = static_cast<std::int64_t>(values.get("global_step"));
  if (first_run_) {  // warm-up: not recorded, but the count starts there, as in TensorFlow
    first_run_ = false;
    timer_.update_last_triggered_step(step);
    return;
  }
  if (!timer_.should_trigger_for_step(step)) return;
  timer_.update_last_triggered_step(step);
  traces_.push_back(context.session().last_trace());
  ++recorded_;
  if (static_cast<std::int64_t>(traces_.size()) > options_.max_steps) traces_.pop_front();
  if (std::chrono::steady_clock::now() - last_write_ >= kWriteInterval) {
    write();
    last_write_ = std::chrono::steady_clock::now();
  }
}

void ProfilerHook::end(MonitoredSession&) { write(); }

void ProfilerHook::write() {
  if (path_.empty()) return;  // no session yet
  written_ = recorded_;
  using nlohmann::json;
  // One track per phase kind, in a fixed order so that every file reads the same.
  std::map<std::string, int> tids{{"pull", 1}, {"forward_backward", 2}, {"push", 3}, {"wait", 4}};
  json events = json::array();
  for (const StepTrace& trace : traces_)
    for (const StepTrace::Phase& phase : trace.phases) {
      const auto [it, added] = tids.try_emplace(phase.name, static_cast<int>(tids.size()) + 1);
      events.push_back({{"name", phase.name},
                        {"cat", "step"},
                        {"ph", "X"},
                        {"pid", worker_},
                        {"tid", it->second},
                        {"ts", phase.begin * 1e6},
                        {"dur", (phase.end - phase.begin) * 1e6},
                        {"args", {{"global_step", trace.global_step}}}});
    }
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", worker_},
                    {"args", {{"name", "worker " + std::to_string(worker_)}}}});
  for (const auto& [name, tid] : tids)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", worker_}, {"tid", tid},
                      {"args", {{"name", name}}}});
  const json trace{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};

  const std::filesystem::path path(path_);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << trace.dump() << '\n';
    if (!out) throw Error("ProfilerHook: cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("ProfilerHook: cannot rename " + tmp + " to " + path_ + ": " + ec.message());
}

}  // namespace cohort
