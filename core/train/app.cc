#include "cohort/core/train/app.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/base/flags.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/environment.h"

namespace cohort::app {

int Run(MainFunction main, int argc, char** argv) {
  mpi::Environment environment(argc, argv);
  const int rank = mpi::Comm::world().rank();
  const int size = mpi::Comm::world().size();

  flags::Registry::Parsed parsed;
  try {
    parsed = flags::Registry::global().parse(std::vector<std::string>(argv, argv + argc));
  } catch (const flags::FlagError& e) {
    // Every rank parses the same command line and fails the same way: rank 0 speaks for all.
    if (rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (parsed.help) {
    if (rank == 0) std::fputs(flags::Registry::global().help(parsed.rest.front()).c_str(), stdout);
    return 0;
  }

  std::vector<char*> rest_argv;
  for (std::string& arg : parsed.rest) rest_argv.push_back(arg.data());
  rest_argv.push_back(nullptr);

  int status = 1;
  try {
    return main(static_cast<int>(parsed.rest.size()), rest_argv.data());
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "[%s] error: %s\n", process_label().c_str(), e.what());
    status = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] error: %s\n", process_label().c_str(), e.what());
  }
  std::fflush(stderr);
  // Alone, a clean return is enough; with peers, only MPI_Abort guarantees nobody hangs waiting
  // for this rank. A moment's grace first lets the peers that fail the same way (a bad input
  // that every rank reads) say so too.
  if (size > 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    mpi::Environment::abort(status);
  }
  return status;
}

}  // namespace cohort::app
