#pragma once
// What the replicas of one node tell each other through the memory they share, without an MPI
// call: the global step each is at, and whether it has ended training.

#include <cstdint>
#include <memory>
#include <vector>

#include "cohort/mpi/comm.h"
#include "cohort/mpi/shared_memory.h"

namespace cohort {

/// Each rank of a node's replicas posts the global step it works on and, once its training ends,
/// the step it ended at; every rank of the node reads them. So a replica whose own loop ended
/// early (uneven data) and one that went on to the next step learn it, in whichever way the
/// steps' sums wait: a sum blocked inside MPI cannot look, but the stall watch's thread can
/// (StallWatch::PeerCheck), as can the leaver while it waits for the others to leave too.
/// Allreduce mode keeps one (core/dist/modes/allreduce.cc).
///
/// Posting is a store to shared memory; reading takes two loads per rank of the node. Not
/// copyable or movable; collective construction, and destruction unless abandoned.
class ReplicaBoard {
 public:
  /// Collective over `ranks`. Null on every rank where no node holds two of them (nothing to
  /// share: a rank alone on its node has no one to tell) or MPI makes no shared-memory window.
  static std::unique_ptr<ReplicaBoard> make(const mpi::Comm& ranks);
  ReplicaBoard(const ReplicaBoard&) = delete;
  ReplicaBoard& operator=(const ReplicaBoard&) = delete;

  /// This rank works on global step `step` now: its next sums are that step's. Local.
  void at_step(std::int64_t step);
  /// This rank has ended training after global step `step`. Local.
  void leave(std::int64_t step);
  /// This rank trains again (training taken up after every rank left alike), from no step until
  /// at_step() says: call it before the last collective step of the new start, so that no rank
  /// is past that step until every rank is back. A rank that rejoined after leave() counts as
  /// having left the training before, for a peer still waiting for the others to leave it (one
  /// that rejoined without, after an error of its own, does not). Local.
  void rejoin();

  /// Where this rank and others of its node part: with this rank left after step S, the ranks
  /// that work on a later step; with this rank at step T, those that left after a step before T.
  struct Parting {
    std::vector<int> ranks;        ///< the others, as ranks of make()'s communicator
    std::int64_t left_at = 0;      ///< the step the leavers ended at (this rank's, or theirs)
    std::int64_t went_on_to = 0;   ///< the step the others went on to (theirs, or this rank's)
    bool this_rank_left = false;   ///< whether this rank is the one that left
  };
  /// The parting seen now; empty ranks where none. Any thread (the stall watch's too).
  Parting parting();
  /// After leave(): whether every rank of the node has left too. Any thread.
  bool all_left();

  /// After an error: the destruction takes no collective step (mpi::SharedMemory::abandon).
  void abandon() noexcept { memory_.abandon(); }

 private:
  ReplicaBoard(const mpi::Comm& node, std::vector<int> ranks);
  // A rank's words: the step it works on, 1 + the step it left at (0: training), how many times
  // it has rejoined (only ranks of one generation are compared), and whether it had left the
  // training before its last rejoin().
  std::int64_t& step_word(int node_rank) { return memory_.of(node_rank)[0]; }
  std::int64_t& left_word(int node_rank) { return memory_.of(node_rank)[1]; }
  std::int64_t& generation_word(int node_rank) { return memory_.of(node_rank)[2]; }
  std::int64_t& left_before_word(int node_rank) { return memory_.of(node_rank)[3]; }

  std::vector<int> ranks_;  // each node rank's rank in make()'s communicator
  mpi::SharedMemory<std::int64_t> memory_;
};

}  // namespace cohort
