#pragma once
// Process clocks, for reports of what a task cost.

namespace cohort {

/// CPU time this process has used so far (user + system, all threads), in seconds.
double process_cpu_seconds();

}  // namespace cohort
