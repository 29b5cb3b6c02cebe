#pragma once
// Stop requests by signal: what Slurm sends before walltime or preemption.

#include "cohort/core/base/error.h"

namespace cohort {

/// Thrown where a stop signal cannot be honoured cleanly (a wait for a stalled task): app::Run
/// then ends the job at once, with status 128 + signal().
class StopSignalled : public Error {
 public:
  StopSignalled(int signal, const std::string& what) : Error(what, 128 + signal), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// Installs handlers for SIGTERM and SIGUSR1 (app::Run does, in every process): the first sets a
/// flag, stop_signal_received(), that each role acts on within a second —
/// - a training session stops at the end of the current step (the chief writes a checkpoint);
/// - a wait for other tasks inside a step gives them a little longer (core/dist/modes/ps_mode.h),
///   then gives up with an error: a stalled peer must not outlast the scheduler's grace period;
/// - a ps (or evaluator) in Server::join() keeps serving until the computing tasks are done;
/// so that every rank exits 0. A second signal ends the process at once (status 128 + signal).
/// Idempotent; process-wide by nature (signal dispositions are), which is why this is global
/// state, as the flags are (and app::fail_at_exit's note, for the same kind of reason).
void install_stop_signal_handlers();

/// The signal number that asked to stop, or 0.
int stop_signal_received();

}  // namespace cohort
