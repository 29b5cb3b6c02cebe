#pragma once
// A deadline for the waits that cannot time out themselves. A polled wait looks at the clock
// (wait.h); an MPI collective or completion whose peer has stalled blocks inside MPI, where
// nothing can. A StallWatch, armed around such a wait, ends the process when the wait outlasts
// the process's stall timeout: MPI's launcher then ends the other ranks, as it does for any rank
// that dies, so a stalled peer costs the job the timeout, not forever.
//
//   StallWatch::set_timeout(std::chrono::minutes(30));   // once (a Trainer does it)
//   const StallWatch watch("the allreduce of the gradients", global_step);
//   replication.after_step(...);

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace cohort {

/// While alive, arms this process's stall deadline, StallWatch::timeout() from now: unless
/// destroyed by then, a background thread prints one line, "[worker:0 rank 1] error: no progress
/// for 1800 s in WHAT (global step N): a peer has stalled or been lost; ending the job", and ends
/// the process with status 1 (std::_Exit: no MPI call, no destructors). Before that, a wait that
/// has lasted a minute is named in a warning, "no progress for 60 s in WHAT ...: a peer may have
/// stalled; the job ends in N s unless it moves", then every five minutes (none in the last
/// tenth of that interval before the deadline), so that a long timeout is not spent in silence
/// (set_warnings() changes the two intervals). Nothing is armed while
/// the timeout is zero (the default). Time the process spends stopped (a suspended job, SIGSTOP)
/// does not count. A watch inside another replaces its deadline until destroyed; the outer one's
/// deadline then holds again, as it was. For the thread that makes the MPI calls; arming costs a
/// few atomic operations, and the watching thread wakes five times a second.
class StallWatch {
 public:
  /// `what` must outlive the watch (a string literal); `step` is named when it is >= 0.
  explicit StallWatch(const char* what, std::int64_t step = -1);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  /// The process's stall timeout: how long a wait inside MPI may last before the process gives
  /// up on its peers. Long, since a peer may legitimately keep the others waiting a while (a
  /// chief restoring, evaluating or saving between steps). Zero: for good.
  static void set_timeout(std::chrono::milliseconds timeout);
  static std::chrono::milliseconds timeout();
  /// When an armed wait is first named in a warning (60 s), and how often again (300 s). Both
  /// positive; an InvalidArgument otherwise.
  static void set_warnings(std::chrono::milliseconds first, std::chrono::milliseconds every);
  /// While one lives, the watch's warnings are left out: a polled wait with a deadline of its
  /// own (wait_until() with a timeout) is under way, and warns itself with that deadline, the
  /// sooner. Any thread; nests.
  class Hush {
   public:
    Hush();
    ~Hush();
    Hush(const Hush&) = delete;
    Hush& operator=(const Hush&) = delete;
  };
  /// The two intervals (wait_until() warns on the same ones).
  static std::chrono::milliseconds first_warning();
  static std::chrono::milliseconds warning_every();

  /// While alive, a look at the peers that the watching thread takes five times a second once
  /// an armed wait has lasted a second: where `check` returns a message (a peer is known never
  /// to join the wait), the process ends as at the deadline, with the line "[worker:0 rank 1]
  /// error: MESSAGE". For what the thread can learn without an MPI call (the memory a node's
  /// ranks share: core/dist/replica_board.h). One at a time: a newer one replaces it, and
  /// destroying one replaced changes nothing. The destructor waits for a look under way to end.
  /// Nothing is looked at while the timeout is zero.
  class PeerCheck {
   public:
    explicit PeerCheck(std::function<std::string()> check);
    ~PeerCheck();
    PeerCheck(const PeerCheck&) = delete;
    PeerCheck& operator=(const PeerCheck&) = delete;

   private:
    std::uint64_t id_;
  };

 private:
  std::int64_t previous_deadline_ = 0;
  const char* previous_what_ = nullptr;
  std::int64_t previous_step_ = -1;
  bool armed_ = false;
};

}  // namespace cohort
