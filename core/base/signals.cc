#include "cohort/core/base/signals.h"

#include <csignal>
#include <unistd.h>

namespace cohort {
namespace {

volatile std::sig_atomic_t received = 0;

extern "C" void on_stop_signal(int signal) {
  if (received != 0) {
    // The second signal: the user (or the scheduler) will not wait for a clean stop.
    static const char message[] = "second stop signal: exiting now\n";
    [[maybe_unused]] const auto written = ::write(2, message, sizeof message - 1);
    ::_exit(128 + signal);
  }
  received = signal;
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI and file calls in progress carry on after the handler
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

int stop_signal_received() { return received; }

}  // namespace cohort
