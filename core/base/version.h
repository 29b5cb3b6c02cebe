#pragma once
// Cohort's version, as the library a program runs with says it.

namespace cohort {

/// "0.1.0": the VERSION file of the source the loaded library was built from (a program built
/// against one install and run with another's libraries reports the other's). `--version` of
/// every app::Run program prints it.
const char* version();

}  // namespace cohort
