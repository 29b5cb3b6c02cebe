// The program docs/GUIDE.md builds step by step: a distributed training program in the shape of
// a TensorFlow-1 one. Flags; the cluster from the MPI ranks; a Server per task; the ps tasks
// serve until the workers are done; the workers train a model of their own under a
// MonitoredTrainingSession with hooks and checkpoints; an optional evaluator task follows the
// checkpoints.
//
//   mpirun -np 3 build/bin/example_guide --ps_tasks=1 --checkpoint_dir=ckpt  # 1 ps, 2 workers
//   mpirun -np 3 build/bin/example_guide --ps_tasks=1 --sync_replicas        # sync SGD
//   mpirun -np 4 build/bin/example_guide                                     # no ps: allreduce
//
// Run by a Cohort batch script it takes --train_steps, --checkpoint_dir and --ps_tasks from
// COHORT_TRAIN_STEPS, COHORT_CHECKPOINT_DIR and COHORT_PS_TASKS where the job's environment has
// them (it has no --model or --mode, so it ignores COHORT_MODEL and COHORT_MODE):
//
//   COHORT_PROGRAM=$PWD/build/bin/example_guide COHORT_MODE=sync
//       sbatch $COHORT_SLURM_DIR/single_node.sbatch --sync_replicas          (one line)
#include <cohort/cohort.h>

#include <cstdio>
#include <memory>

// Step 1, the flags (tf.app.flags). The cluster's own flags (--ps_tasks, --job_name,
// --task_index, --cluster_spec), the placement's, --reset_optimizer and --data_dir come with the
// library (docs/FLAGS.md).
COHORT_DEFINE_int(train_steps, 1000, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_string(checkpoint_dir, "",
                     "the chief restores from and writes checkpoints and summaries here "
                     "(empty: none)");
COHORT_DEFINE_float(learning_rate, 0.05, "learning rate of plain SGD", cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true});
COHORT_DEFINE_int(hidden_units, 128, "units of the hidden layer", cohort::flags::Range{1, 1 << 16});
COHORT_DEFINE_bool(sync_replicas, false,
                   "with ps tasks: aggregate every worker's gradients each step (sync SGD), "
                   "else async SGD",
                   cohort::flags::kSameOnAllRanks);

namespace {

// Step 5, the model: flatten, a hidden ReLU layer, 10 logits, softmax cross-entropy. The trainer
// calls it once per tower; the towers share the variables it creates.
cohort::Model classifier(cohort::Graph& graph) {
  cohort::Model model(graph, {28, 28, 1});
  model.add(cohort::flatten("flatten"))
      .add(cohort::dense("hidden", FLAGS_hidden_units, cohort::Activation::kRelu))
      .add(cohort::dense("logits", 10));
  model.set_loss(std::make_unique<cohort::SoftmaxCrossEntropyLoss>());  // the default, shown
  return model;
}

// Step 7, a hook of one's own (tf.train.SessionRunHook): runs on every worker, counts its steps
// and reports them with the last loss when the session ends.
class WorkerReportHook : public cohort::SessionRunHook {
 public:
  cohort::SessionRunArgs before_run(cohort::RunContext&) override { return {{"loss"}}; }
  void after_run(cohort::RunContext&, const cohort::SessionRunValues& values) override {
    ++steps_;
    last_loss_ = values.get("loss");
  }
  void end(cohort::MonitoredSession& session) override {
    std::printf("worker %d: %lld steps, last loss %.4f\n", session.worker_index(), steps_,
                last_loss_);
  }

 private:
  long long steps_ = 0;
  double last_loss_ = 0;
};

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  // Step 2, the cluster (tf.train.ClusterSpec): every rank builds the same one from the flags.
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  // Step 3, this task's server (tf.train.Server): its job and task come from its rank.
  cohort::Server server(cluster);
  if (server.job_name() == "ps") {
    server.join();  // serves the variables until every worker is done, then returns
    return 0;
  }
  if (server.job_name() == "evaluator") {  // follows the chief's checkpoints (in --checkpoint_dir)
    cohort::Graph graph;
    cohort::Model model = classifier(graph);
    cohort::run_evaluator(server, model, cohort::data::fashion_mnist(cohort::data::Split::kTest),
                          {.checkpoint_dir = FLAGS_checkpoint_dir});
    return 0;
  }

  // Step 4, placement (tf.train.replica_device_setter): variables on the ps tasks, the
  // computation on this worker ("/job:worker/task:N").
  const int ps_tasks = cluster.num_tasks("ps");
  cohort::Graph graph{cohort::ReplicaDeviceSetter(
      cohort::replica_device_setter_options_from_flags(ps_tasks, server.worker_device()))};

  // Step 6, the trainer: this worker's shard of the data, the model, the optimizer, and how the
  // workers' updates meet (with ps tasks: sync or async SGD; without: allreduce).
  const auto train = cohort::data::fashion_mnist(
      cohort::data::Split::kTrain, {server.replica_index(), server.num_replicas()});
  if (FLAGS_sync_replicas && ps_tasks == 0)
    throw cohort::InvalidArgument("--sync_replicas: for ps tasks (--ps_tasks); without, the workers allreduce");
  cohort::TrainerOptions options;
  options.replication.mode = ps_tasks == 0          ? cohort::Mode::kAllreduce
                             : FLAGS_sync_replicas ? cohort::Mode::kSync
                                                   : cohort::Mode::kAsync;
  cohort::Trainer trainer(
      &server, graph, classifier, train,
      cohort::Optimizer::create({.name = "sgd", .learning_rate = {.base = FLAGS_learning_rate}}),
      options);

  // Step 7, the session (tf.train.MonitoredTrainingSession): the chief initialises the variables
  // or restores the latest checkpoint, and alone writes checkpoints and summaries.
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps),
                std::make_shared<cohort::NanTensorHook>(),  // a diverged run stops, exit 1
                std::make_shared<WorkerReportHook>()},
      .chief_only_hooks = {std::make_shared<cohort::LoggingTensorHook>(
          cohort::LoggingTensorHookOptions{.tensors = {"global_step", "loss", "accuracy"},
                                           .every_n_iter = 100,
                                           .at_end = true})},
      .save_checkpoint_secs = 60});
  while (!session->should_stop()) session->run();
  if (const int signal = cohort::stop_signal_received(); signal != 0 && server.is_chief())
    std::printf("stopped by signal %d at global step %lld\n", signal,
                static_cast<long long>(trainer.global_step()));

  // Step 8, the end: close() runs the hooks' end() (the final checkpoint among them) and leaves
  // the final parameters in the graph, done() lets the ps tasks return from join(), and the chief
  // evaluates on the test set.
  session->close();
  server.done();
  if (server.is_chief()) {
    const cohort::StepMetrics test =
        trainer.evaluate(cohort::data::fashion_mnist(cohort::data::Split::kTest));
    std::printf(
        "guide: %d worker%s, %d ps, mode %s, global step %lld, test loss %.4f, "
        "test accuracy %.4f\n",
        server.num_replicas(), server.num_replicas() == 1 ? "" : "s", ps_tasks,
        cohort::to_string(trainer.mode()), static_cast<long long>(trainer.read_global_step()), test.loss,
        test.accuracy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
