// A model whose output is an image, on any number of workers: a small U-Net (two strided
// convolutions down, two transposed ones back up, the skips joined at equal sizes) that learns
// to remove noise from the user's images, or to map images to images of their own (a
// segmentation's masks, a restoration's originals):
//
//   mpirun -np 3 build/bin/example_denoise                          # Fashion-MNIST, 3 workers
//   mpirun -np 4 build/bin/example_denoise --ps_tasks=1 --mode=sync --train=clean.npy --test=clean_test.npy
//   mpirun -np 2 build/bin/example_denoise --train=photos.npy,masks.npy --test=photos_test.npy,masks_test.npy
//       --loss=sigmoid_cross_entropy --predictions=masks_predicted.npy           (one line)
//
// --train and --test name CLEAN.npy (images [n, height, width] or [n, height, width, channels],
// whose noisy copies, with Gaussian noise of standard deviation --noise clipped to [0, 1], are
// the inputs; the same copies for every worker and run, by --seed) or INPUTS.npy,TARGETS.npy
// (pairs, as many of each, of the same height and width; the channels may differ), or an HDF5
// file FILE.h5 holding either in datasets --hdf5_inputs (and --hdf5_targets). Clean images,
// and the masks of sigmoid cross-entropy and Dice, are values in [0, 1] (bytes / 255). Height and
// width must be multiples of 4 (the model halves them twice). Each worker reads its shard of the
// training files; the chief evaluates on the test files (--test, required with --train; without
// either, Fashion-MNIST's 60000 training images and its first 2000 test images), prints the
// test loss (with mean_squared_error and targets shaped as the inputs, beside the noisy inputs'
// own error), and writes the model's outputs for the test inputs to --predictions (.npy;
// probabilities with --loss=sigmoid_cross_entropy or dice).
#include <cohort/cohort.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

COHORT_DEFINE_string(train, "", "training images: CLEAN.npy, INPUTS.npy,TARGETS.npy or FILE.h5 (empty: Fashion-MNIST's)");
COHORT_DEFINE_string(test, "", "test images, in the same form (with --train; without either: Fashion-MNIST's)");
COHORT_DEFINE_string(hdf5_inputs, "x", "FILE.h5: the dataset of clean images, or of inputs with --hdf5_targets (a path, as group/x)");
COHORT_DEFINE_string(hdf5_targets, "", "FILE.h5: the dataset of target images (empty: --hdf5_inputs are clean images to add noise to)");
COHORT_DEFINE_float(noise, 0.3, "CLEAN.npy: the standard deviation of the Gaussian noise added to make the inputs",
                    cohort::flags::Range{0, 10});
COHORT_DEFINE_int(seed, 1, "the noise's seed (an image's noise depends on it, its set and its index alone)",
                  cohort::flags::Range{0, 1e15});
COHORT_DEFINE_string(loss, "mean_squared_error",
                     "the loss: per pixel (mean_squared_error; sigmoid_cross_entropy for masks) or per image's mask (dice)",
                     cohort::flags::Choices{"mean_squared_error", "sigmoid_cross_entropy", "dice"});
COHORT_DEFINE_int(filters, 16, "filters of the first level (the second has twice as many)", cohort::flags::Range{1, 4096});
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_int(train_steps, 300, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(batch_size, 32, "images per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_float(learning_rate, 0.003, "Adam's learning rate", cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true});
COHORT_DEFINE_string(predictions, "", "chief: write the model's outputs for the test inputs to this .npy file");

namespace {

// `array` (of the .npy file `path`, given by flag `what`) as images [n, height, width, channels]
// (a channel added to [n, height, width]), its values finite, and in [0, 1] where `unit` (clean
// images, which the noise is clipped to; masks of sigmoid cross-entropy and Dice). Its rows are
// the file's rows `shard` keeps, for messages.
cohort::Tensor as_images(const cohort::Tensor& array, const std::string& path, const std::string& what,
                         cohort::data::ShardSpec shard, bool unit) {
  const std::int64_t per_row = array.size() / std::max<std::int64_t>(array.dim(0), 1);
  for (std::int64_t i = 0; i < array.size(); ++i)
    if (!std::isfinite(array[i]) || (unit && (array[i] < 0.0f || array[i] > 1.0f)))
      throw cohort::InvalidArgument(what + "=" + path + ": image " + std::to_string(shard.index + i / per_row * shard.count) +
                                    " holds " + std::to_string(array[i]) +
                                    (unit ? ", not a value in [0, 1] (scale the images: bytes / 255)" : ", not finite"));
  cohort::Shape shape = array.shape();
  cohort::data::check_not_channels_first(cohort::Shape(shape.begin() + 1, shape.end()), what + "=" + path,
                                         "save them as numpy's x.transpose(0, 2, 3, 1)");
  if (shape.size() == 3) shape.push_back(1);
  if (shape.size() != 4)
    throw cohort::InvalidArgument(what + "=" + path + ": an array of shape " + cohort::to_string(array.shape()) +
                                  ", expected images [n, height, width] or [n, height, width, channels]");
  if (shape[1] % 4 != 0 || shape[2] % 4 != 0)
    throw cohort::InvalidArgument(what + "=" + path + ": images of " + std::to_string(shape[1]) + "x" +
                                  std::to_string(shape[2]) + "; the model halves them twice, so their height "
                                  "and width must be multiples of 4");
  return cohort::Tensor(shape, array.span());
}

// `clean` [n, ...] of set `what` with Gaussian noise of --noise, clipped to [0, 1]: the noise of
// row r (the file's row first + r * step) depends on --seed, the set and that row alone, so every
// worker and run makes the same (with one C++ library: their normal distributions differ).
cohort::Tensor noisy(const cohort::Tensor& clean, const std::string& what, std::int64_t first, std::int64_t step) {
  cohort::Tensor out = clean;
  if (FLAGS_noise == 0) return out;
  const std::int64_t n = clean.dim(0), size = clean.size() / std::max<std::int64_t>(n, 1);
  const std::uint64_t set = what == "test" ? 0x5851F42D4C957F2DULL : 0;
  for (std::int64_t r = 0; r < n; ++r) {
    std::mt19937_64 random((static_cast<std::uint64_t>(FLAGS_seed) * 0x9E3779B97F4A7C15ULL ^ set) +
                           static_cast<std::uint64_t>(first + r * step));
    std::normal_distribution<float> gaussian(0.0f, static_cast<float>(FLAGS_noise));
    float* image = out.data() + r * size;
    for (std::int64_t i = 0; i < size; ++i) image[i] = std::clamp(image[i] + gaussian(random), 0.0f, 1.0f);
  }
  return out;
}

// Fashion-MNIST's images [n, 28, 28, 1]: of the training set, the rows `shard` keeps; of the test
// set, the first 2000.
cohort::Tensor fashion_mnist(const std::string& what, cohort::data::ShardSpec shard) {
  if (what == "train") return cohort::data::fashion_mnist(cohort::data::Split::kTrain, shard).storage()->features;
  const cohort::data::Dataset test = cohort::data::fashion_mnist(cohort::data::Split::kTest);
  const cohort::Tensor& all = test.storage()->features;
  const std::int64_t count = std::min<std::int64_t>(2000, all.dim(0));
  return cohort::Tensor({count, 28, 28, 1}, all.span().first(static_cast<std::size_t>(count * 784)));
}

bool is_hdf5(const std::string& path) { return path.ends_with(".h5") || path.ends_with(".hdf5"); }

// The pairs of --`what`=`spec` that `shard` keeps: clean images and their noisy copies
// (CLEAN.npy, FILE.h5's dataset --hdf5_inputs, or empty: Fashion-MNIST's), or inputs and targets
// (INPUTS.npy,TARGETS.npy, or FILE.h5 with --hdf5_targets).
cohort::data::Dataset load(const std::string& what, const std::string& spec, cohort::data::ShardSpec shard) {
  const std::vector<std::string> files = cohort::flags::split_list(what, spec);
  const std::string flag = "--" + what;
  const bool hdf5 = files.size() == 1 && is_hdf5(files[0]);
  if (files.size() > 2 || (files.size() == 2 && (is_hdf5(files[0]) || is_hdf5(files[1]))))
    throw cohort::InvalidArgument(flag + "=" + spec + ": expected CLEAN.npy, INPUTS.npy,TARGETS.npy or FILE.h5");
  if (!hdf5 && (!FLAGS_hdf5_targets.empty() || cohort::flags::Registry::global().given("hdf5_inputs")))
    throw cohort::InvalidArgument(
        (FLAGS_hdf5_targets.empty() ? "--hdf5_inputs=" + FLAGS_hdf5_inputs : "--hdf5_targets=" + FLAGS_hdf5_targets) +
        ": for an HDF5 file, and " + flag + "=" + spec + (files.empty() ? " gives none" : " is not one"));
  if (files.empty() || (files.size() == 1 && FLAGS_hdf5_targets.empty())) {
    cohort::Tensor clean =
        files.empty()
            ? fashion_mnist(what, shard)
            : as_images(hdf5 ? cohort::data::load_hdf5(files[0], FLAGS_hdf5_inputs, shard).values
                             : cohort::data::load_npy(files[0], shard).values,
                        files[0], flag, shard, true);
    cohort::Tensor inputs = noisy(clean, what, shard.index, shard.count);
    return cohort::data::Dataset::from_arrays(std::move(inputs), std::move(clean),
                                              files.empty() ? "Fashion-MNIST" : files[0]);
  }
  // As many of each (checked over the whole files), this worker's shard of them.
  const cohort::data::Dataset pairs =
      hdf5 ? cohort::data::dataset_from_hdf5(files[0], FLAGS_hdf5_inputs, FLAGS_hdf5_targets, 0, shard)
           : cohort::data::dataset_from_npy(files[0], files[1], 0, shard);
  const std::string inputs_name = hdf5 ? files[0] + " '" + FLAGS_hdf5_inputs + "'" : files[0];
  const std::string targets_name = hdf5 ? files[0] + " '" + FLAGS_hdf5_targets + "'" : files[1];
  if (pairs.has_labels())
    throw cohort::InvalidArgument(flag + "=" + spec + ": " + targets_name + " holds a class label per image, "
                                  "not target images");
  cohort::Tensor inputs = as_images(pairs.storage()->features, inputs_name, flag, shard, false);
  cohort::Tensor targets =
      as_images(pairs.storage()->targets, targets_name, flag, shard, FLAGS_loss != "mean_squared_error");
  if (inputs.dim(1) != targets.dim(1) || inputs.dim(2) != targets.dim(2))
    throw cohort::InvalidArgument(flag + "=" + spec + ": images of " + std::to_string(inputs.dim(1)) + "x" +
                                  std::to_string(inputs.dim(2)) + " and targets of " + std::to_string(targets.dim(1)) +
                                  "x" + std::to_string(targets.dim(2)) + ": the model's output is of its input's size");
  return cohort::data::Dataset::from_arrays(std::move(inputs), std::move(targets), spec);
}

// The U-Net: [H, W, C] down to [H/2, W/2, F] and [H/4, W/4, 2F], back up to [H/2, W/2] joined
// with the first level, to [H, W] joined with the input, and a 3x3 convolution to the targets'
// channels (linear: pixel values, or logits for sigmoid cross-entropy and Dice).
cohort::Model unet(cohort::Graph& graph, const cohort::Shape& input, std::int64_t out_channels) {
  const std::int64_t f = FLAGS_filters;
  cohort::Model model(graph);
  const cohort::Node x = model.input(input);
  const cohort::Node e1 = model.apply(cohort::conv2d("down1", f, 3, cohort::Activation::kRelu, 2), x);
  const cohort::Node e2 = model.apply(cohort::conv2d("down2", 2 * f, 3, cohort::Activation::kRelu, 2), e1);
  cohort::Node d = model.apply(cohort::conv2d_transpose("up1", f, 4, cohort::Activation::kRelu, 2), e2);
  d = model.apply(cohort::concatenate("skip1"), {d, e1});
  d = model.apply(cohort::conv2d_transpose("up2", f, 4, cohort::Activation::kRelu, 2), d);
  d = model.apply(cohort::concatenate("skip2"), {d, x});
  d = model.apply(cohort::conv2d("refine", f, 3, cohort::Activation::kRelu), d);
  model.apply(cohort::conv2d("pixels", out_channels, 3), d);
  model.set_loss(cohort::make_loss(FLAGS_loss));
  return model;
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  if (server.is_chief())
    cohort::check_outputs({{"--predictions", FLAGS_predictions}},
                          {{"--train", FLAGS_train}, {"--test", FLAGS_test}});
  if (FLAGS_train.empty() != FLAGS_test.empty())
    throw cohort::InvalidArgument(FLAGS_train.empty() ? "--test=" + FLAGS_test + " without --train: give the training images too"
                                                      : "--train=" + FLAGS_train + " without --test: give the test images too");
  // Pairs to train on and clean images to test on (or the reverse) are two tasks: the noise of
  // the pairs is theirs, the clean images' this program's.
  if (cohort::flags::split_list("train", FLAGS_train).size() != cohort::flags::split_list("test", FLAGS_test).size())
    throw cohort::InvalidArgument("--test=" + FLAGS_test + " and --train=" + FLAGS_train +
                                  ": not in the same form (clean images, or inputs and targets); give both alike");
  const cohort::data::Dataset train = load("train", FLAGS_train, {server.replica_index(), server.num_replicas()});
  std::optional<cohort::data::Dataset> test;  // the chief's
  if (server.is_chief()) test = load("test", FLAGS_test, {});

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  cohort::OptimizerOptions adam;
  adam.name = "adam";
  adam.learning_rate.base = FLAGS_learning_rate;
  const cohort::Shape input = train.example_shape(), target = train.target_shape();
  cohort::Trainer trainer(
      &server, graph, [&](cohort::Graph& g) { return unet(g, input, target.back()); }, train,
      cohort::Optimizer::create(adam), options);
  if (test) cohort::check_dataset(trainer.model(), *test, /*whole=*/true);  // now, not after the whole run
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps), std::make_shared<cohort::NanTensorHook>()}});
  while (!session->should_stop()) session->run();
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    const cohort::StepMetrics m = trainer.evaluate(*test);
    std::printf("denoise: %d worker%s, %lld parameters, global step %lld, test %s %.5f",
                server.num_replicas(), server.num_replicas() == 1 ? "" : "s",
                static_cast<long long>(graph.num_parameters()),
                static_cast<long long>(trainer.read_global_step()), FLAGS_loss.c_str(), m.loss);
    // The inputs' own error, where they are images of the targets' kind.
    const cohort::Tensor& inputs = test->storage()->features;
    const cohort::Tensor& targets = test->storage()->targets;
    if (FLAGS_loss == "mean_squared_error" && inputs.shape() == targets.shape()) {
      double sum = 0;
      for (std::int64_t i = 0; i < inputs.size(); ++i) sum += double(inputs[i] - targets[i]) * (inputs[i] - targets[i]);
      std::printf(" (the inputs' own: %.5f)", sum / static_cast<double>(inputs.size()));
    }
    std::printf("\n");
    if (!FLAGS_predictions.empty()) {
      const bool probabilities = FLAGS_loss != "mean_squared_error";
      cohort::data::save_npy(FLAGS_predictions,
                             probabilities ? trainer.predict_probabilities(inputs) : trainer.predict(inputs));
      std::printf("denoise: the outputs for %lld test images written to %s\n",
                  static_cast<long long>(inputs.dim(0)), FLAGS_predictions.c_str());
    }
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
