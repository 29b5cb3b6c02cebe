// A GAN on any number of workers, in any mode: a training step of one's own
// (TrainerOptions::step) trains a generator and a discriminator together, and the modes,
// hooks and checkpoints take its gradient as they take a model's.
//
//   mpirun -np 2 build/bin/example_gan                              # allreduce over 2 workers
//   mpirun -np 3 build/bin/example_gan --ps_tasks=1 --mode=sync     # 1 parameter server, 2 workers
//
// The generator learns to draw from the normal distribution N(--mean, --stddev) from noise
// N(0, 1); the discriminator, to tell its samples from the real ones (Goodfellow et al. 2014,
// with the generator's non-saturating loss). Each step computes both models' gradients on the
// same batch (the generator's through the discriminator's gradient with respect to its input,
// Model::forward and Model::backward) and the optimizer applies them together. The chief then
// prints the mean and standard deviation of samples the generator draws, over the last half of
// training (a GAN's samples wander about the distribution rather than settle on it).
#include <cohort/cohort.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

COHORT_DEFINE_int(train_steps, 8000, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(batch_size, 128, "real samples per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"},
                     cohort::flags::kSameOnAllRanks);
COHORT_DEFINE_float(learning_rate, 0.0005, "Adam's learning rate", cohort::flags::Range{.min = 0, .max = 1, .min_excluded = true});
COHORT_DEFINE_float(mean, 3.0, "the mean of the distribution to learn", cohort::flags::Range{-1e6, 1e6});
COHORT_DEFINE_float(stddev, 0.5, "its standard deviation", cohort::flags::Range{.min = 0, .max = 1e6, .min_excluded = true});
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore the latest checkpoint from, and save checkpoints to, here");

namespace {

// Noise [1] to a sample [1].
cohort::Model generator(cohort::Graph& graph) {
  cohort::Model model(graph);
  cohort::Node x = model.input({1}, "noise");
  x = model.apply(cohort::dense("generator/hidden", 16, "tanh"), x);
  model.apply(cohort::dense("generator/sample", 1), x);
  return model;
}

// A sample [1] to the logit of its being real.
cohort::Model discriminator(cohort::Graph& graph) {
  cohort::Model model(graph);
  cohort::Node x = model.input({1}, "sample");
  x = model.apply(cohort::dense("discriminator/hidden", 32, "tanh"), x);
  model.apply(cohort::dense("discriminator/logit", 1), x);
  model.set_loss(std::make_unique<cohort::SigmoidCrossEntropyLoss>());
  return model;
}

// What one tower keeps besides its discriminator (the trainer's model): its generator, and the
// buffers of its steps.
struct GanTower {
  explicit GanTower(cohort::Model model) : generator(std::move(model)) {}
  cohort::Model generator;
  cohort::Tensor noise, both, labels, all_real, grad_logits, grad_fake;
  std::vector<float> discriminator_grads, generator_grads;
  cohort::SigmoidCrossEntropyLoss generator_loss;
};

// One step on `real` (a batch of real samples): the discriminator's gradient on them as 1 and as
// many of the generator's samples as 0, and the generator's for its samples called real, both
// into `grads`. Returns the discriminator's loss.
cohort::StepMetrics gan_step(GanTower& tower, cohort::Model& discriminator,
                             const cohort::Tensor& real, std::span<float> grads,
                             const cohort::OpContext& context) {
  const std::int64_t n = real.dim(0);
  std::mt19937_64 random(context.seed);
  std::normal_distribution<float> normal;
  tower.noise.resize({n, 1});
  for (std::int64_t i = 0; i < n; ++i) tower.noise[i] = normal(random);
  const cohort::Tensor& fake = tower.generator.forward(tower.noise, context);

  tower.both.resize({2 * n, 1});
  tower.labels.resize({2 * n, 1});
  for (std::int64_t i = 0; i < n; ++i) {
    tower.both[i] = real[i];
    tower.both[n + i] = fake[i];
    tower.labels[i] = 1.0f;
    tower.labels[n + i] = 0.0f;
  }
  // The discriminator's gradient, zeros in the generator's slots.
  const cohort::StepMetrics metrics =
      discriminator.train_step(tower.both, cohort::Targets{{}, &tower.labels}, grads, context);

  // The generator's: through the discriminator, whose own gradient here is not wanted.
  tower.all_real.resize({n, 1});
  for (std::int64_t i = 0; i < n; ++i) tower.all_real[i] = 1.0f;
  cohort::OpContext again = context;
  again.update_state = false;  // a second pass: batch norm's statistics, if any, once a step
  const cohort::Tensor& logits = discriminator.forward(fake, again);
  tower.generator_loss.forward(logits, cohort::Targets{{}, &tower.all_real});
  tower.generator_loss.backward(tower.grad_logits);
  tower.discriminator_grads.resize(grads.size());
  tower.generator_grads.resize(grads.size());
  cohort::Tensor* input_grads[] = {&tower.grad_fake};
  discriminator.backward(tower.grad_logits, tower.discriminator_grads, input_grads);
  tower.generator.backward(tower.grad_fake, tower.generator_grads);
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] += tower.generator_grads[i];
  return metrics;
}

// The mean and standard deviation of 4096 samples of `model` (a generator).
std::pair<double, double> sample_statistics(cohort::Model& model, std::mt19937_64& random) {
  std::normal_distribution<float> normal;
  cohort::Tensor noise({4096, 1});
  for (std::int64_t i = 0; i < noise.size(); ++i) noise[i] = normal(random);
  const cohort::Tensor& samples = model.predict(noise);
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < samples.size(); ++i) sum += samples[i];
  const double mean = sum / static_cast<double>(samples.size());
  for (std::int64_t i = 0; i < samples.size(); ++i)
    squares += (samples[i] - mean) * (samples[i] - mean);
  return {mean, std::sqrt(squares / static_cast<double>(samples.size()))};
}

// On the chief: the generator's samples every 100 global steps over the last half of training.
class SampleStatisticsHook : public cohort::SessionRunHook {
 public:
  explicit SampleStatisticsHook(cohort::Model& generator) : generator_(generator) {}
  cohort::SessionRunArgs before_run(cohort::RunContext&) override { return {{"global_step"}}; }
  void after_run(cohort::RunContext&, const cohort::SessionRunValues& values) override {
    const auto step = static_cast<std::int64_t>(values.get("global_step"));
    if (2 * step < FLAGS_train_steps || step < next_) return;
    next_ = step - step % 100 + 100;
    const auto [mean, deviation] = sample_statistics(generator_, random_);
    mean_ += mean;
    deviation_ += deviation;
    ++count_;
  }
  void end(cohort::MonitoredSession&) override {
    if (count_ == 0) return;
    std::printf("gan: generated samples over the last half of training: mean %.4f, standard "
                "deviation %.4f (averages of %d measurements; the data's: %g and %g)\n",
                mean_ / count_, deviation_ / count_, count_, FLAGS_mean, FLAGS_stddev);
  }

 private:
  cohort::Model& generator_;
  std::mt19937_64 random_{12345};
  std::int64_t next_ = 0;
  double mean_ = 0, deviation_ = 0;
  int count_ = 0;
};

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  const int workers = server.num_replicas();
  cohort::Graph graph{cohort::ReplicaDeviceSetter(
      cohort::replica_device_setter_options_from_flags(cluster.num_tasks("ps"), server.worker_device()))};

  // The real samples: this worker's own draws (a shard of one data set would do as well).
  const std::int64_t examples = 16384;
  cohort::Tensor samples({examples, 1}), targets({examples, 1});
  std::mt19937_64 random(1000 + static_cast<std::uint64_t>(server.replica_index()));
  std::normal_distribution<float> normal(static_cast<float>(FLAGS_mean), static_cast<float>(FLAGS_stddev));
  for (std::int64_t i = 0; i < examples; ++i) {
    samples[i] = normal(random);
    targets[i] = 1.0f;
  }

  // The trainer's model is the discriminator; each tower's generator is built beside it, on the
  // same graph, so that its variables are the graph's too (trained, checkpointed, shared).
  std::vector<std::unique_ptr<GanTower>> towers;
  const auto discriminator_and_generator = [&](cohort::Graph& g) {
    towers.push_back(std::make_unique<GanTower>(generator(g)));
    return discriminator(g);
  };
  cohort::TrainerOptions options;
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  options.batch_size = FLAGS_batch_size;
  options.step = [&](cohort::Model& model, int tower, const cohort::Tensor& real,
                     const cohort::Targets&, std::span<float> grads,
                     const cohort::OpContext& context) {
    return gan_step(*towers[static_cast<std::size_t>(tower)], model, real, grads, context);
  };
  cohort::OptimizerOptions adam;
  adam.name = "adam";
  adam.beta1 = 0.5;
  adam.learning_rate.base = FLAGS_learning_rate;
  cohort::Trainer trainer(&server, graph, discriminator_and_generator,
                          cohort::data::Dataset::from_arrays(std::move(samples), std::move(targets), "real samples"),
                          cohort::Optimizer::create(adam), options);

  cohort::HookList chief_hooks;
  if (server.is_chief()) chief_hooks.push_back(std::make_shared<SampleStatisticsHook>(towers.front()->generator));
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps), std::make_shared<cohort::NanTensorHook>()},
      .chief_only_hooks = chief_hooks,
      .log_step_count_steps = 0});
  while (!session->should_stop()) session->run();
  session->close();
  server.done();
  if (server.is_chief())
    std::printf("gan: %d worker%s, --mode=%s, global step %lld\n", workers, workers == 1 ? "" : "s",
                FLAGS_mode.c_str(), static_cast<long long>(trainer.read_global_step()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
