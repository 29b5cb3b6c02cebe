#pragma once
// The program entry point, the seed's tf.app.run():
//
//   int Main(int argc, char** argv) { ... }
//   int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }

namespace cohort::app {

using MainFunction = int (*)(int argc, char** argv);

/// Initialises MPI, parses the flags (core/flags.h), calls `main` with the arguments that are not
/// flags, and finalises MPI. Returns the exit status:
/// - `--help`: rank 0 prints the flags, every rank returns 0 without calling `main`;
/// - a bad command line: rank 0 prints one `error: ...` line, every rank returns 2;
/// - an exception escaping `main` on any rank: that rank prints `[worker:1 rank 3] error: ...`
///   and calls MPI_Abort, which ends every rank of the job (status 1; 2 for InvalidArgument);
/// - otherwise `main`'s return value.
int Run(MainFunction main, int argc, char** argv);

}  // namespace cohort::app
