#include "cohort/mpi/window.h"

#include <chrono>
#include <climits>
#include <map>
#include <thread>
#include <utility>

namespace cohort::mpi::detail {
namespace {

// The ranks of `comm` as ranks of MPI_COMM_WORLD: which processes a window joins, and so which
// transports MPI may use between them.
std::vector<int> world_ranks(const Comm& comm) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  COHORT_MPI_CALL(MPI_Comm_group(comm.get(), &group));
  COHORT_MPI_CALL(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> ranks(static_cast<std::size_t>(comm.size())), out(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
  const int translated = MPI_Group_translate_ranks(group, comm.size(), ranks.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (translated != MPI_SUCCESS)
    throw MpiError("MPI_Group_translate_ranks", translated, __FILE__, __LINE__);
  return out;
}

// The rank that probes the transport to rank 0: the lowest rank on another node where there is
// one (the network's transport is the one that may need its target's help), else rank 1.
int probe_origin(const Comm& comm) {
  const Comm node = comm.split_shared();
  const int leader = node.allreduce(comm.rank(), Op::kMin);  // rank 0 leads its own node
  const int elsewhere = comm.allreduce(leader != 0 ? comm.rank() : INT_MAX, Op::kMin);
  return elsewhere != INT_MAX ? elsewhere : 1;
}

}  // namespace

bool transfers_need_no_target(MPI_Win win, const Comm& comm, MPI_Aint probe_disp,
                              const volatile unsigned char* probe_byte) {
  // MPI picks a window's transport from the processes it joins, so one answer holds for every
  // window over the same processes. Every rank of `comm` asks at the same window, so every rank
  // finds the same entry (or none).
  static std::map<std::vector<int>, bool> known;
  const std::vector<int> key = world_ranks(comm);
  if (const auto it = known.find(key); it != known.end()) return it->second;

  constexpr int kTarget = 0;
  constexpr auto kPatience = std::chrono::seconds(1);
  const int origin = probe_origin(comm);
  int landed = 0;
  if (comm.rank() == origin) {
    const unsigned char one = 1;
    COHORT_MPI_CALL(MPI_Win_lock(MPI_LOCK_SHARED, kTarget, 0, win));
    COHORT_MPI_CALL(MPI_Put(&one, 1, MPI_BYTE, kTarget, probe_disp, 1, MPI_BYTE, win));
    COHORT_MPI_CALL(MPI_Win_unlock(kTarget, win));  // where the target must answer, waits for it
  } else if (comm.rank() == kTarget) {
    // No MPI call until the byte lands or patience runs out. Yielding lets an origin that shares
    // this core run; after a millisecond, short sleeps.
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (*probe_byte != 0) {
        landed = 1;
        break;
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kPatience) break;
      if (waited < std::chrono::milliseconds(1))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  COHORT_MPI_CALL(MPI_Bcast(&landed, 1, MPI_INT, kTarget, comm.get()));
  known.emplace(key, landed != 0);
  return landed != 0;
}

}  // namespace cohort::mpi::detail
