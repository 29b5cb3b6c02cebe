// A user's program whose hook fails on one worker. --fail_in=after_run: it catches the error,
// closes its session and returns --status (1), as a program that reports its own failures would;
// its peers may be waiting for it in a collective (allreduce mode's agreement to stop) or train
// on for --steps (the ps modes, whose memory it shares), and the job must still end within
// seconds with the program's status (1 where it returned 0), not hang. --fail_in=end: the hook throws
// in end(), from the session's destructor (the program never calls close()), which cannot throw:
// the program returns 0 and must still fail. --fail_in=loop: no hook fails, but the program's own
// loop ends early on that worker (uneven data, say), after --fail_at steps; it closes its session
// and returns 0 while its peers train on: in allreduce mode both sides must fail within seconds,
// naming each other, not wait for each other for good, in every way of summing (--sums).
#include <cstdio>
#include <memory>

#include "cohort/cohort.h"

COHORT_DEFINE_string(mode, "allreduce", "training mode");
COHORT_DEFINE_string(fail_in, "after_run", "where the failing worker's hook throws (after_run, end), or loop");
COHORT_DEFINE_int(replica, 1, "the failing worker's replica index");
COHORT_DEFINE_int(fail_at, 3, "after_run: the step at which it throws");
COHORT_DEFINE_int(steps, 1000, "after_run: the steps the others train for");
COHORT_DEFINE_int(status, 1, "after_run: what the failed worker's program returns");
COHORT_DEFINE_string(sums, "shared_memory",
                     "allreduce mode's sums: shared_memory, mpi (MPI_Allreduce alone), buckets "
                     "(during the backward pass), bf16");

namespace {

class FailingHook final : public cohort::SessionRunHook {
 public:
  void after_run(cohort::RunContext&, const cohort::SessionRunValues&) override {
    if (++steps_ == FLAGS_fail_at && FLAGS_fail_in == "after_run")
      throw cohort::Error("the hook failed at its step " + std::to_string(steps_));
  }
  void end(cohort::MonitoredSession&) override {
    if (FLAGS_fail_in == "end") throw cohort::Error("the hook failed in end()");
  }

 private:
  int steps_ = 0;
};

int Main(int, char**) {
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  options.replication.shared_memory_sums = FLAGS_sums == "shared_memory";
  if (FLAGS_sums == "buckets") options.replication.bucket_bytes = 4096;
  if (FLAGS_sums == "bf16") options.replication.compression = cohort::Compression::kBf16;
  cohort::OptimizerOptions sgd;
  sgd.name = "sgd";
  cohort::Trainer trainer(
      &server, graph, [](cohort::Graph& g) { return cohort::build_model("mlp", g); },
      cohort::data::synthetic(512, 3).shard(server.replica_index(), server.num_replicas()),
      cohort::Optimizer::create(sgd), options);
  cohort::SessionOptions session_options{.master = server.target(), .is_chief = server.is_chief()};
  session_options.hooks.push_back(cohort::StopAtStepHook::last(FLAGS_fail_in == "end" ? 10 : FLAGS_steps));
  if (server.replica_index() == FLAGS_replica) session_options.hooks.push_back(std::make_shared<FailingHook>());
  auto session = cohort::MonitoredTrainingSession(trainer, session_options);
  if (FLAGS_fail_in == "loop") {
    const int steps = server.replica_index() == FLAGS_replica ? FLAGS_fail_at : FLAGS_steps;
    for (int i = 0; i < steps && !session->should_stop(); ++i) session->run();
    session->close();
    server.done();
    return 0;
  }
  if (FLAGS_fail_in == "end") {
    while (!session->should_stop()) session->run();
    return 0;  // the session closes as it is destroyed
  }
  try {
    while (!session->should_stop()) session->run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
    session->close();
    return FLAGS_status;
  }
  session->close();
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
