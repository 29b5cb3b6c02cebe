#pragma once
// The program entry point, the seed's tf.app.run():
//
//   int Main(int argc, char** argv) { ... }
//   int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }

#include <string>

namespace cohort::app {

using MainFunction = int (*)(int argc, char** argv);

/// Initialises MPI, installs the stop-signal handlers (core/base/signals.h) in every process
/// whatever its role, parses the flags (core/base/flags.h), calls `main` with the arguments that
/// are not flags, and finalises MPI. Collective over MPI_COMM_WORLD. Returns the exit status:
/// - an MPI library of another family than Cohort was built with (mpi::Environment), or an
///   MPI that fails to start: each process prints `error: ...` and returns 1;
/// - `--help` on any rank: the lowest rank given it prints its program's flags, every rank
///   returns 0 without calling `main`;
/// - a bad command line on any rank (one side of an MPMD launch included): each rank that failed
///   prints one `[rank N] error: ...` line (one line in all when every rank failed alike), and
///   every rank returns 2 — nobody is left waiting;
/// - a flag marked kSameOnAllRanks with different values on two ranks: rank 0 prints
///   `error: --mode differs between ranks: rank 0 has 'sync', rank 3 has 'async'`, every rank
///   returns 2;
/// - an exception escaping `main` on any rank: that rank prints `[worker:1 rank 3] error: ...`
///   and calls MPI_Abort, which ends every rank of the job (status 1; 2 for InvalidArgument);
/// - a non-zero return from `main` in a job of several processes (a program that caught its
///   error and said so): `[worker:1 rank 3] error: the program returned 1: ending the job`, and
///   MPI_Abort with that status, since its peers may be waiting for it in a collective;
/// - `main` returning 0 after fail_at_exit(what, status): `what` printed, and that status;
/// - `main` returning 0 in a job of several processes after a session's error left memory its
///   peers must free with it (mpi::Environment::left_behind()): named, and MPI_Abort with 1;
/// - otherwise `main`'s return value.
int Run(MainFunction main, int argc, char** argv);

/// For an error that cannot be thrown where it happens (a destructor's, such as a session closed
/// by its destructor whose hook failed in end()): Run ends the program with `status` (1, or
/// 128 + signal for a stop signal's error), naming `what`, even if `main` returns 0.
/// Thread-safe; the first call's is kept.
void fail_at_exit(const std::string& what, int status = 1);

/// For a `main` that takes no arguments besides its flags (absl's "too many command-line
/// arguments"): throws InvalidArgument naming the first, such as a flag typed without its dashes
/// (`batch_size=32`). `argv[0]` is the program.
void refuse_arguments(int argc, char** argv);

}  // namespace cohort::app
