#include "cohort/core/dist/replica_board.h"

#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "support/mpi_test.h"

using cohort::ReplicaBoard;

// What each rank posts, with a barrier after it (the board's words are atomic; the barrier orders
// one rank's posting before the others' reading), and what each then reads, with a barrier after
// that too (no rank posts anew while another still reads).
COHORT_MPI_TEST_CASE("the replica board: a rank that left, and ranks that went on", 3) {
  const std::unique_ptr<ReplicaBoard> board = ReplicaBoard::make(comm);
  REQUIRE(board != nullptr);  // one node holds all three
  for (std::int64_t step = 1; step <= 5; ++step) board->at_step(step);
  comm.barrier();
  CHECK(board->parting().ranks.empty());
  CHECK_FALSE(board->all_left());
  comm.barrier();

  // Rank 1 ends training after step 5; the others, still at step 5, have not parted from it.
  if (comm.rank() == 1) board->leave(5);
  comm.barrier();
  CHECK(board->parting().ranks.empty());
  CHECK_FALSE(board->all_left());
  comm.barrier();

  // Rank 2 goes on to step 6: it and rank 1 part; rank 0 (still at 5) parts from no one.
  if (comm.rank() == 2) board->at_step(6);
  comm.barrier();
  const ReplicaBoard::Parting parting = board->parting();
  if (comm.rank() == 0) CHECK(parting.ranks.empty());
  if (comm.rank() == 1) {
    CHECK(parting.ranks == std::vector<int>{2});
    CHECK(parting.this_rank_left);
    CHECK(parting.left_at == 5);
    CHECK(parting.went_on_to == 6);
  }
  if (comm.rank() == 2) {
    CHECK(parting.ranks == std::vector<int>{1});
    CHECK_FALSE(parting.this_rank_left);
    CHECK(parting.left_at == 5);
    CHECK(parting.went_on_to == 6);
  }
  comm.barrier();

  // Training taken up again by every rank (as start() does after that error), then left alike
  // after step 8.
  board->rejoin();
  comm.barrier();
  for (std::int64_t step = 7; step <= 8; ++step) board->at_step(step);
  comm.barrier();
  board->leave(8);
  comm.barrier();
  CHECK(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();

  // Rank 0 takes training up again first, from an earlier step (a warm start): for the others,
  // still waiting for every rank to leave the last training, it has left it; it parts from no
  // one, nor they from it, though their step words (8) pass its own (3).
  if (comm.rank() == 0) {
    board->rejoin();
    board->at_step(3);
  }
  comm.barrier();
  if (comm.rank() != 0) CHECK(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();
  // The others come back: their old steps (8) count for nothing once they have rejoined, so
  // rank 0, leaving after step 3 at once (before they post a step of this training), parts
  // from no one.
  if (comm.rank() != 0) board->rejoin();
  comm.barrier();
  CHECK_FALSE(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();
  if (comm.rank() == 0) board->leave(3);
  comm.barrier();
  CHECK(board->parting().ranks.empty());
  comm.barrier();
  // They post step 3 and leave there too: every rank has left, alike.
  if (comm.rank() != 0) {
    board->at_step(3);
    board->leave(3);
  }
  comm.barrier();
  CHECK(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();

  // Training once more; rank 1 abandons it after an error of its own (no leave()) and takes it
  // up again at once: the others, leaving after step 4, must not count it as having left.
  board->rejoin();
  comm.barrier();
  board->at_step(4);
  comm.barrier();
  if (comm.rank() == 1) board->rejoin();
  if (comm.rank() != 1) board->leave(4);
  comm.barrier();
  if (comm.rank() != 1) CHECK_FALSE(board->all_left());
  comm.barrier();
}
