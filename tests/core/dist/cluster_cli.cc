// cluster_cli: builds the cluster from the command line the way a training program does, starts
// a Server and ends cleanly (ps tasks join, workers call done). One line per rank, for the run
// tests in this directory.
#include <chrono>
#include <cstdio>

#include "cohort/core/dist/cluster.h"
#include "cohort/core/dist/server.h"
#include "cohort/core/train/app.h"

namespace {

int Main(int, char**) {
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  std::printf("task %s rank %d of %d target %s device %s chief %d\n",
              server.task().to_string().c_str(), cluster.my_rank(), cluster.size(),
              server.target().c_str(), server.worker_device().c_str(), server.is_chief() ? 1 : 0);
  std::fflush(stdout);
  if (server.is_computing()) {
    server.done();
  } else {
    server.join(std::chrono::seconds(20));
    std::printf("%s joined: every worker is done\n", server.task().to_string().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
