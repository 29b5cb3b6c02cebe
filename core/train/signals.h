#pragma once
// Stop requests by signal: what Slurm sends before walltime or preemption.

namespace cohort {

/// Installs handlers for SIGTERM and SIGUSR1: the first sets a flag that training loops check
/// (stop_signal_received()), so they stop at the end of the current step, checkpoint and exit 0;
/// a second signal ends the process at once. Idempotent; process-wide by nature (signal
/// dispositions are), which is why this is the one piece of global state besides the flags.
void install_stop_signal_handlers();

/// The signal number that asked to stop, or 0.
int stop_signal_received();

}  // namespace cohort
