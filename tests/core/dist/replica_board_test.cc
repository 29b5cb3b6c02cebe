#include "cohort/core/dist/replica_board.h"

#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "support/mpi_test.h"

using cohort::ReplicaBoard;

// What each rank posts, with a barrier after it (the board's words are atomic; the barrier orders
// one rank's posting before the others' reading), and what each then reads.
COHORT_MPI_TEST_CASE("the replica board: a rank that left, and ranks that went on", 3) {
  const std::unique_ptr<ReplicaBoard> board = ReplicaBoard::make(comm);
  REQUIRE(board != nullptr);  // one node holds all three
  for (std::int64_t step = 1; step <= 5; ++step) board->at_step(step);
  comm.barrier();
  CHECK(board->parting().ranks.empty());
  CHECK_FALSE(board->all_left());

  // Rank 1 ends training after step 5; the others, still at step 5, have not parted from it.
  if (comm.rank() == 1) board->leave(5);
  comm.barrier();
  CHECK(board->parting().ranks.empty());
  CHECK_FALSE(board->all_left());

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

  // Every rank leaves alike after step 8, and takes training up again.
  for (std::int64_t step = 7; step <= 8; ++step) board->at_step(step);
  if (comm.rank() == 1) board->rejoin();
  comm.barrier();
  board->leave(8);
  comm.barrier();
  CHECK(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();
  board->rejoin();
  comm.barrier();
  CHECK_FALSE(board->all_left());
  CHECK(board->parting().ranks.empty());
  comm.barrier();
}
