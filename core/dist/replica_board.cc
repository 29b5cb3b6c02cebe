#include "cohort/core/dist/replica_board.h"

#include <atomic>
#include <utility>

namespace cohort {
namespace {

// Another process writes the word: every access is atomic (lock-free on aligned 8-byte words, so
// it holds across the processes that map the memory).
std::int64_t load(std::int64_t& word) {
  return std::atomic_ref<std::int64_t>(word).load(std::memory_order_acquire);
}
void store(std::int64_t& word, std::int64_t value) {
  std::atomic_ref<std::int64_t>(word).store(value, std::memory_order_release);
}

}  // namespace

std::unique_ptr<ReplicaBoard> ReplicaBoard::make(const mpi::Comm& ranks) {
  mpi::Comm node = ranks.split_shared();
  if (ranks.allreduce(node.size(), mpi::Op::kMax) == 1) return nullptr;
  std::vector<int> of_node = node.allgather(ranks.rank());
  // Where MPI has no shared-memory window (Open MPI without its osc sm component), none.
  std::unique_ptr<ReplicaBoard> board;
  if (!mpi::made_on_every_rank(ranks,
                               [&] { board.reset(new ReplicaBoard(node, std::move(of_node))); }))
    return nullptr;
  return board;
}

// Zeroed memory reads as step 0, training, generation 0: what every rank posts at first.
ReplicaBoard::ReplicaBoard(const mpi::Comm& node, std::vector<int> ranks)
    : ranks_(std::move(ranks)), memory_(node, 4) {}

void ReplicaBoard::at_step(std::int64_t step) { store(step_word(memory_.comm().rank()), step); }

void ReplicaBoard::leave(std::int64_t step) { store(left_word(memory_.comm().rank()), step + 1); }

void ReplicaBoard::rejoin() {
  const int me = memory_.comm().rank();
  // No step until at_step(): a stale one, the last training's, must not look like a step gone
  // on to. Then training, in a generation of its own.
  store(step_word(me), 0);
  store(left_before_word(me), load(left_word(me)) != 0 ? 1 : 0);
  store(left_word(me), 0);
  store(generation_word(me), load(generation_word(me)) + 1);
}

ReplicaBoard::Parting ReplicaBoard::parting() {
  Parting parting;
  const int me = memory_.comm().rank();
  const std::int64_t my_left = load(left_word(me));
  const std::int64_t generation = load(generation_word(me));
  parting.this_rank_left = my_left != 0;
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    // A rank of another training than this one's (not back yet, or back already) parts from
    // none of its steps.
    if (r == me || load(generation_word(r)) != generation) continue;
    const std::int64_t left = load(left_word(r));
    if (my_left != 0) {
      // This rank left after step my_left - 1: a rank still training on a later step went on.
      const std::int64_t step = load(step_word(r));
      if (left == 0 && step > my_left - 1) {
        parting.ranks.push_back(ranks_[static_cast<std::size_t>(r)]);
        parting.left_at = my_left - 1;
        parting.went_on_to = step;
      }
    } else if (left != 0) {
      // This rank trains on: a rank that left after an earlier step than this one's ended early.
      const std::int64_t step = load(step_word(me));
      if (left - 1 < step) {
        parting.ranks.push_back(ranks_[static_cast<std::size_t>(r)]);
        parting.left_at = left - 1;
        parting.went_on_to = step;
      }
    }
  }
  return parting;
}

bool ReplicaBoard::all_left() {
  const std::int64_t generation = load(generation_word(memory_.comm().rank()));
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    if (load(left_word(r)) != 0) continue;
    // Back in a later training: it left this one, unless it abandoned it after an error of its
    // own (then the others are not to go on as if it had left with them).
    if (load(generation_word(r)) > generation && load(left_before_word(r)) != 0) continue;
    return false;
  }
  return true;
}

}  // namespace cohort
