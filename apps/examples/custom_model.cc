// A training program written against an installed Cohort: its own model, and its own hook next
// to the standard ones.
//
//   mpirun -np 3 build/bin/example_custom_model --ps_tasks=1   # 1 parameter server, 2 workers, sync SGD
#include <cohort/cohort.h>

#include <cstdio>
#include <memory>

COHORT_DEFINE_int(train_steps, 300, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_string(mode, "sync", "how workers combine updates",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"},
                     cohort::flags::kSameOnAllRanks);
COHORT_DEFINE_float(learning_rate, 0.05, "learning rate", cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true});
COHORT_DEFINE_int(hidden_units, 64, "units of the hidden layer", cohort::flags::Range{1, 1 << 16});

namespace {

// The model: flatten, one hidden ReLU layer, 10 logits. Called once per tower; the towers share
// the variables it creates.
cohort::Model small_mlp(cohort::Graph& graph) {
  cohort::Model model(graph, {28, 28, 1});
  model.add(cohort::flatten("flatten"))
      .add(cohort::dense("hidden", FLAGS_hidden_units, cohort::Activation::kRelu))
      .add(cohort::dense("logits", 10));
  return model;
}

// The hook: averages the loss over the first and the last 20 steps this worker ran and reports
// both when the session ends.
class LossTrendHook : public cohort::SessionRunHook {
 public:
  cohort::SessionRunArgs before_run(cohort::RunContext&) override { return {{"loss", "global_step"}}; }

  void after_run(cohort::RunContext&, const cohort::SessionRunValues& values) override {
    const double loss = values.get("loss");
    if (steps_ < kWindow) first_ += loss / kWindow;
    recent_[steps_ % kWindow] = loss;
    ++steps_;
    last_step_ = static_cast<long long>(values.get("global_step"));
  }

  void end(cohort::MonitoredSession& session) override {
    double last = 0;
    for (double loss : recent_) last += loss / kWindow;
    std::printf("loss trend hook (%s): %lld steps run here, up to global step %lld; mean loss of "
                "the first %d %.4f, of the last %d %.4f\n",
                session.is_chief() ? "chief" : "worker", steps_, last_step_, kWindow, first_,
                kWindow, last);
  }

 private:
  static constexpr int kWindow = 20;
  long long steps_ = 0, last_step_ = 0;
  double first_ = 0;
  double recent_[kWindow] = {};
};

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {  // a ps task serves the variables until the workers are done
    server.join();
    return 0;
  }

  const int workers = server.num_replicas();  // the workers (and a chief job's task, if any)
  cohort::Graph graph{cohort::ReplicaDeviceSetter(
      cohort::replica_device_setter_options_from_flags(cluster.num_tasks("ps"), server.worker_device()))};

  cohort::TrainerOptions options;
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  cohort::OptimizerOptions sgd;
  sgd.name = "sgd";
  sgd.learning_rate.base = FLAGS_learning_rate;
  cohort::Trainer trainer(&server, graph, small_mlp,
                          cohort::data::fashion_mnist(cohort::data::Split::kTrain,
                                                      {server.replica_index(), workers}),
                          cohort::Optimizer::create(sgd), options);

  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps),
                std::make_shared<cohort::NanTensorHook>(), std::make_shared<LossTrendHook>()}});
  while (!session->should_stop()) session->run();
  session->close();  // the hooks' end(); the graph then holds the final parameters
  server.done();     // lets the ps tasks return from join()

  if (server.is_chief()) {
    const auto test = trainer.evaluate(cohort::data::fashion_mnist(cohort::data::Split::kTest));
    std::printf("custom_model: %d worker%s, global step %lld, test accuracy %.4f\n", workers,
                workers == 1 ? "" : "s", static_cast<long long>(trainer.read_global_step()),
                test.accuracy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
