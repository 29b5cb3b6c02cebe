#include "cohort/core/train/app.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>  // environ

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/base/signals.h"
#include "cohort/core/base/version.h"
#include "cohort/core/nn/cpu_level.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/request.h"

namespace cohort::app {
namespace {

std::mutex failure_mutex;
std::string failure;  // fail_at_exit()'s first `what`
int failure_status = 1;

// Collective: every rank says whether its command line parsed. A rank that failed prints its own
// message (unless a lower rank printed the same one: every rank of an SPMD launch fails alike,
// and rank 0 then says it for all), so a bad flag on any side of an MPMD launch is shown and ends
// every rank, none left waiting.
bool parsed_everywhere(const mpi::Comm& world, const std::string& error) {
  const std::vector<std::string> errors = world.allgather_strings(error);
  const int me = world.rank();
  if (world.size() > 1 && !error.empty() &&
      std::all_of(errors.begin(), errors.end(), [&](const std::string& e) { return e == error; })) {
    if (me == 0) std::fprintf(stderr, "[all %d ranks] error: %s\n", world.size(), error.c_str());
    return false;
  }
  bool all_ok = true;
  for (int r = 0; r < world.size(); ++r) {
    const std::string& e = errors[static_cast<std::size_t>(r)];
    if (e.empty()) continue;
    all_ok = false;
    if (r == me) {
      bool said = false;
      for (int lower = 0; lower < r; ++lower) said = said || errors[static_cast<std::size_t>(lower)] == e;
      if (!said) {
        if (world.size() == 1) std::fprintf(stderr, "error: %s\n", e.c_str());
        else std::fprintf(stderr, "[rank %d] error: %s\n", me, e.c_str());
      }
    }
  }
  return all_ok;
}

// Collective: the flags marked same-on-all-ranks that two ranks both define must have the same
// value. Returns "" or the first mismatch: "--mode differs between ranks: rank 0 has sync, rank 3
// has async".
std::string settings_mismatch(const mpi::Comm& world) {
  std::string mine;
  for (const flags::Flag& flag : flags::Registry::global().flags())
    if (flag.same_on_all_ranks) mine += flag.name + '\n' + flags::value_text(flag) + '\n';
  const std::vector<std::string> all = world.allgather_strings(mine);
  auto settings = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t name_end = text.find('\n', at);
      const std::size_t value_end = text.find('\n', name_end + 1);
      pairs.emplace_back(text.substr(at, name_end - at), text.substr(name_end + 1, value_end - name_end - 1));
      at = value_end + 1;
    }
    return pairs;
  };
  // Each flag against the first rank that has it: in an MPMD launch another program (without
  // the flag) may be rank 0.
  std::map<std::string, std::pair<std::string, std::size_t>> first;  // value, rank
  for (std::size_t r = 0; r < all.size(); ++r)
    for (const auto& [name, value] : settings(all[r])) {
      const auto [seen, added] = first.try_emplace(name, value, r);
      if (!added && seen->second.first != value)
        return "--" + name + " differs between ranks: rank " + std::to_string(seen->second.second) +
               " has '" + seen->second.first + "', rank " + std::to_string(r) + " has '" + value +
               "'";
    }
  return {};
}

// After a failure: whether every rank failed with the same message, found within `window` on
// `errors`, a communicator of its own (a rank still in the program's collectives cannot match
// it). A rank that did not fail never joins, and the answer is then no. `least` holds the
// least hash and ~ the greatest: static at the caller, since an agreement left pending (a rank
// that did not fail) may still be written into while this rank waits for MPI_Abort.
bool failed_alike(const mpi::Comm& errors, const std::string& what, std::chrono::milliseconds window,
                  std::array<std::uint64_t, 2>& least) {
  const std::uint64_t hash = std::hash<std::string>{}(what);
  least = {hash, ~hash};
  mpi::Request request;
  try {
    request = errors.iallreduce(std::span<std::uint64_t>(least), mpi::Op::kMin);
    for (const auto deadline = std::chrono::steady_clock::now() + window;
         std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(1)))
      if (request.test()) return least[0] == ~least[1];
  } catch (const std::exception&) {  // an MPI that cannot say: each rank speaks for itself
  }
  request.abandon();  // never waited for: its peers may never join
  return false;
}

}  // namespace

void fail_at_exit(const std::string& what, int status) {
  std::lock_guard lock(failure_mutex);
  if (!failure.empty()) return;
  failure = what.empty() ? "failed" : what;
  failure_status = status != 0 ? status : 1;
}

void refuse_arguments(int argc, char** argv) {
  if (argc > 1)
    throw InvalidArgument("unexpected argument " + quote(argv[1]) +
                          ": this program takes flags only (--name=value)");
}

int Run(MainFunction main, int argc, char** argv) {
  // Every role, a ps in join() as much as a worker in its session, outlives the scheduler's
  // warning signal: what each does about it is its own business (core/base/signals.h). From
  // the first moment: MPI's start-up alone takes a noticeable part of a second.
  install_stop_signal_handlers();
  std::optional<mpi::Environment> environment;
  try {
    environment.emplace(argc, argv);
  } catch (const Error& e) {  // no MPI to end the job with: each process says it and exits
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  const mpi::Comm world = mpi::Comm::world();

  flags::Registry::Parsed parsed;
  std::string error;
  try {
    parsed = flags::Registry::global().parse(std::vector<std::string>(argv, argv + argc));
    check_cpu_level();
  } catch (const InvalidArgument& e) {  // a flag, or COHORT_CPU_LEVEL
    error = e.what();
  }
  if (!parsed_everywhere(world, error)) return 2;
  // Decided together: --help (or --version) on one side of an MPMD launch alone must not leave
  // the others waiting in the collectives below. The lowest rank that asked prints its program's
  // flags (or the version).
  const bool asked_here = parsed.help || parsed.version;
  const int asked = world.allreduce(asked_here ? world.rank() : INT_MAX, mpi::Op::kMin);
  if (asked != INT_MAX) {
    const std::string& program = parsed.rest.front();
    if (world.rank() == asked && parsed.help)
      std::fputs(flags::Registry::global().help(program).c_str(), stdout);
    else if (world.rank() == asked)
      std::printf("%s (Cohort %s)\n", program.substr(program.rfind('/') + 1).c_str(), version());
    return 0;
  }
  if (const std::string mismatch = settings_mismatch(world); !mismatch.empty()) {
    if (world.rank() == 0) std::fprintf(stderr, "error: %s\n", mismatch.c_str());
    return 2;
  }
  if (world.rank() == 0) {  // a typo in a batch script's variable, said once
    std::vector<std::string> names;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text(*entry);
      names.push_back(text.substr(0, text.find('=')));
    }
    for (const std::string& warning : flags::Registry::global().misspelt_environment(names))
      std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }

  // For failed_alike(), made while every rank is here.
  const mpi::Comm errors = world.size() > 1 ? world.dup() : mpi::Comm();

  std::vector<char*> rest_argv;
  for (std::string& arg : parsed.rest) rest_argv.push_back(arg.data());
  rest_argv.push_back(nullptr);

  int status = 1;
  std::chrono::milliseconds grace(500);
  std::string what;
  try {
    status = main(static_cast<int>(parsed.rest.size()), rest_argv.data());
    int noted_status = 1;
    {
      std::lock_guard lock(failure_mutex);
      what = failure;
      noted_status = failure_status;
    }
    const std::string left = mpi::Environment::left_behind();
    if (what.empty() && status == 0 && !left.empty() && world.size() > 1) {
      // Its peers would wait for this rank in the free of what it left, for good.
      what = "the program returned 0, but " + left + ": ending the job";
      status = 1;
    } else if (what.empty()) {
      // A program that failed and said so itself: alone, its status is all; with peers, they
      // may wait for it in a collective.
      if (status == 0 || world.size() == 1) return status;
      what = "the program returned " + std::to_string(status) + ": ending the job";
    } else if (status == 0) {
      status = noted_status;
    }
  } catch (const StopSignalled& e) {
    what = e.what();
    status = e.exit_status();  // 128 + the signal
    grace = std::chrono::milliseconds::zero();
  } catch (const Error& e) {
    what = e.what();
    status = e.exit_status();
  } catch (const std::bad_alloc&) {
    what = "out of memory (std::bad_alloc): this process asked for more memory than it can have";
  } catch (const std::exception& e) {
    what = e.what();
  }
  // What the program printed comes first, also where stdout is a buffered file.
  std::fflush(stdout);
  const auto failed = std::chrono::steady_clock::now();
  what = one_line(what);
  // A bad input that every rank reads fails every rank alike: rank 0 says it once, not once per
  // rank; one that every worker reads (the ps tasks serving on), the first worker says it for
  // the workers. Otherwise each failed rank says its own.
  static std::array<std::uint64_t, 2> world_least, group_least;
  const mpi::Comm* group = mpi::Environment::failure_group();
  const bool agree = world.size() > 1 && grace > std::chrono::milliseconds::zero();
  const bool alike = agree && failed_alike(errors, what, grace / 2, world_least);
  // A shorter window: what is left of the grace lets the others (a ps) say their own.
  const bool group_alike = agree && !alike && group != nullptr &&
                           failed_alike(*group, what, grace / 4, group_least);
  const bool speaks_for_all = alike && world.rank() == 0;
  if (alike) {
    if (speaks_for_all) std::fprintf(stderr, "[all %d ranks] error: %s\n", world.size(), what.c_str());
  } else if (group_alike) {
    if (group->rank() == 0)
      std::fprintf(stderr, "[all %d %s] error: %s\n", group->size(),
                   mpi::Environment::failure_group_members().c_str(), what.c_str());
  } else {
    // A stop signal is no error of this rank's (mpirun sends one to every rank as it ends a job
    // another rank failed): a log scraper that matches "error: " finds the rank that failed.
    std::fprintf(stderr, "[%s] %s%s\n", process_label().c_str(), status > 128 ? "" : "error: ", what.c_str());
  }
  std::fflush(stderr);
  // Alone, a clean return is enough; with peers, only MPI_Abort guarantees nobody hangs waiting
  // for this rank. A moment's grace first lets the peers that fail the same way (a bad input
  // that every rank reads) say so too; none is needed after a stop signal, nor by rank 0 once
  // it has spoken for all ranks.
  if (world.size() > 1) {
    if (!speaks_for_all) std::this_thread::sleep_until(failed + grace);
    mpi::Environment::abort(status);
  }
  return status;
}

}  // namespace cohort::app
