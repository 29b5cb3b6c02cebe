#pragma once
// A deadline for the waits that cannot time out themselves. A polled wait looks at the clock
// (wait.h); an MPI collective or completion whose peer has stalled blocks inside MPI, where
// nothing can. A StallWatch, armed around such a phase, ends the process when the phase outlasts
// its deadline: MPI's launcher then ends the other ranks, as it does for any rank that dies, so
// a stalled peer costs the job the deadline, not forever.
//
//   const StallWatch watch(std::chrono::seconds(180), "step", global_step);
//   replication.after_step(...);   // an allreduce with every worker

#include <chrono>
#include <cstdint>

namespace cohort {

/// While alive, arms this process's stall deadline: unless destroyed within `timeout`, a
/// background thread prints one line, "[worker:0 rank 1] error: no progress for 180 s in WHAT
/// (global step N): a peer has stalled or been lost; ending the job", and ends the process with
/// status 1 (std::_Exit: no MPI call, no destructors). `timeout` zero arms nothing. Watches nest:
/// an inner one replaces the outer's deadline until it is destroyed. For one thread (the one
/// that makes the MPI calls); the check costs two atomic stores, the thread wakes a few times a
/// second.
class StallWatch {
 public:
  /// `what` must outlive the watch (a string literal); `step` is named when it is >= 0.
  StallWatch(std::chrono::milliseconds timeout, const char* what, std::int64_t step = -1);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  /// How long a process that has finished training waits for the others to finish too (their
  /// part of the parameter memory's free, MPI_Finalize, which waits for every process of the
  /// job) before it gives up on them: long, since a chief may still evaluate or export while
  /// the others wait. Process-wide; zero (the default) is for good. A Trainer sets it.
  static void set_finish_timeout(std::chrono::milliseconds timeout);
  static std::chrono::milliseconds finish_timeout();

 private:
  std::int64_t previous_deadline_ = 0;
  std::int64_t previous_timeout_ = 0;
  const char* previous_what_ = nullptr;
  std::int64_t previous_step_ = -1;
  bool armed_ = false;
};

}  // namespace cohort
