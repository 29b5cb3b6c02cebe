// replica_board_watch: rank 1 ends training after step 5 and then stays away (it reads nothing,
// as a rank busy elsewhere would); rank 0 goes on to step 6 and waits for rank 1 inside MPI, in a
// barrier it will never join, under a StallWatch with a long timeout. The watch's thread looks at
// the node's board (StallWatch::PeerCheck) and must end rank 0 within seconds, naming the
// parting, long before the timeout.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cohort/core/base/stall_watch.h"
#include "cohort/core/dist/replica_board.h"
#include "cohort/core/train/app.h"
#include "cohort/mpi/comm.h"

namespace {

int Main(int, char**) {
  const cohort::mpi::Comm world = cohort::mpi::Comm::world();
  const std::unique_ptr<cohort::ReplicaBoard> board = cohort::ReplicaBoard::make(world);
  if (!board) throw cohort::Error("no replica board: the ranks share no node");
  cohort::StallWatch::set_timeout(std::chrono::minutes(10));
  board->at_step(5);
  world.barrier();
  if (world.rank() == 1) {
    board->leave(5);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  const cohort::StallWatch::PeerCheck check([&board] {
    const cohort::ReplicaBoard::Parting parting = board->parting();
    return parting.ranks.empty() ? std::string()
                                 : "went on to step " + std::to_string(parting.went_on_to) +
                                       ", rank " + std::to_string(parting.ranks.front()) +
                                       " left after step " + std::to_string(parting.left_at);
  });
  board->at_step(6);
  const cohort::StallWatch watch("a barrier rank 1 never joins", 6);
  world.barrier();
  std::printf("the barrier returned\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
