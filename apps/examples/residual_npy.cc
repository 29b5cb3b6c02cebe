// A residual network trained on the user's own data, from NumPy files:
//
//   data="--train_features=x_train.npy --train_labels=y_train.npy"
//   data+=" --test_features=x_test.npy --test_labels=y_test.npy"
//   mpirun -np 3 build/bin/example_residual_npy --mode=allreduce $data
//
// x_*.npy hold images [n, rows, cols, channels] (or [n, rows, cols]) of any float or integer
// dtype, y_*.npy the class of each as integers (--num_classes of them, or the largest label
// + 1). The test files are optional: without them the program trains and does not evaluate;
// with them, they are checked against the model before training. Without file flags the program writes a part of
// Fashion-MNIST to .npy files first (in --export_dir) and trains on those, so it runs as it is.
#include <cohort/cohort.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

COHORT_DEFINE_string(train_features, "", "training images, .npy");
COHORT_DEFINE_string(train_labels, "", "training labels, .npy of integers");
COHORT_DEFINE_string(test_features, "", "test images, .npy");
COHORT_DEFINE_string(test_labels, "", "test labels, .npy of integers");
COHORT_DEFINE_string(export_dir, "/tmp/cohort_residual_npy",
                     "without file flags: where Fashion-MNIST is written as .npy first");
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async and ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_int(train_steps, 200, "global steps to train", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_float(learning_rate, 0.05, "learning rate (momentum 0.9, cosine decay)",
                    cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true});
COHORT_DEFINE_int(filters, 16, "filters of the residual blocks", cohort::flags::Range{1, 4096});
COHORT_DEFINE_int(batch_size, 64, "examples per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_bool(channels_first, false,
                   "the images are [n, channels, height, width] (PyTorch's layout): turn them to [n, height, width, channels]");
COHORT_DEFINE_int(num_classes, 0, "classes of the labels (0: the largest training label + 1)",
                  cohort::flags::Range{0, 1 << 24});

namespace {

// A residual block in a few lines, made of existing layers: no backward pass to write.
class ResidualBlock : public cohort::CompositeLayer {
 public:
  ResidualBlock(std::string name, std::int64_t filters)
      : CompositeLayer(std::move(name)), filters_(filters) {}

 protected:
  cohort::Node compose(cohort::Node x) override {
    cohort::Node y = apply(cohort::conv2d(scoped("conv1"), filters_, 3), x);
    y = apply(cohort::batch_norm(scoped("bn1")), y);
    y = apply(cohort::activation(scoped("relu1"), "relu"), y);
    y = apply(cohort::conv2d(scoped("conv2"), filters_, 3), y);
    y = apply(cohort::batch_norm(scoped("bn2")), y);
    y = apply(cohort::add(scoped("add")), {y, x});
    return apply(cohort::activation(scoped("relu2"), "relu"), y);
  }

 private:
  std::int64_t filters_;
};

// The network, with the functional API: a stem, two residual blocks around a strided
// convolution, global average pooling and the logits.
cohort::Model residual_network(cohort::Graph& graph, const cohort::Shape& example, int classes) {
  cohort::Model model(graph);
  cohort::Node x = model.input(example);
  x = model.apply(cohort::conv2d("stem", FLAGS_filters, 3), x);
  x = model.apply(cohort::batch_norm("stem_bn"), x);
  x = model.apply(cohort::activation("stem_relu", "relu"), x);
  x = model.apply(std::make_unique<ResidualBlock>("block1", FLAGS_filters), x);
  x = model.apply(cohort::conv2d("down", 2 * FLAGS_filters, 3, cohort::Activation::kRelu, 2), x);
  x = model.apply(std::make_unique<ResidualBlock>("block2", 2 * FLAGS_filters), x);
  x = model.apply(cohort::global_avg_pool2d("pool"), x);
  model.apply(cohort::dense("logits", classes), x);
  return model;
}

// The `split` ("train", "test") of --<split>_features=`x`, --<split>_labels=`y`:
// images [n, rows, cols, channels], or [n, rows, cols], which become [n, rows, cols, 1], or with
// --channels_first [n, channels, rows, cols], turned; with class labels.
cohort::data::Dataset images(cohort::data::Dataset data, const std::string& split,
                             const std::string& x, const std::string& y) {
  if (!data.has_labels())
    throw cohort::InvalidArgument("--" + split + "_labels=" + y + ": targets of shape " +
                                  cohort::to_string(data.target_shape()) +
                                  " an example, where this classifier needs one integer class "
                                  "label an example (an array [n] of integers)");
  const std::size_t rank = data.example_shape().size();
  if (rank != 2 && rank != 3)
    throw cohort::InvalidArgument("--" + split + "_features=" + x + ": examples of shape " +
                                  cohort::to_string(data.example_shape()) +
                                  ", expected images [rows, cols] or [rows, cols, channels]");
  const std::string what = "--" + split + "_features=" + x;
  if (!FLAGS_channels_first) cohort::data::check_not_channels_first(data.example_shape(), what, "give --channels_first to turn them");
  if (FLAGS_channels_first) return cohort::data::channels_last(data, what);
  if (rank == 3) return data;
  auto storage = std::make_shared<cohort::data::Storage>(*data.storage());
  cohort::Shape shape = storage->features.shape();
  shape.push_back(1);
  storage->features = cohort::Tensor(shape, storage->features.span());
  return cohort::data::Dataset(storage);
}

// Writes `count` examples of a Fashion-MNIST split as two .npy files; returns their paths.
std::pair<std::string, std::string> export_npy(cohort::data::Split split, std::int64_t count,
                                               const std::string& prefix) {
  const cohort::data::Dataset data = cohort::data::fashion_mnist(split);
  count = std::min(count, data.size());
  cohort::Tensor x({count, 28, 28, 1});
  std::vector<std::int32_t> y(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const auto image = data.example(i);
    std::copy(image.begin(), image.end(), x.data() + i * 784);
    y[static_cast<std::size_t>(i)] = data.label(i);
  }
  const std::string features = prefix + "_x.npy", labels = prefix + "_y.npy";
  cohort::data::save_npy(features, x);
  cohort::data::save_npy(labels, y);
  return {features, labels};
}

// --NAME_features and --NAME_labels: both or neither.
void pair_of_flags(const std::string& name, const std::string& features,
                   const std::string& labels) {
  if (features.empty() == labels.empty()) return;
  const std::string given = features.empty() ? "_labels" : "_features";
  const std::string missing = features.empty() ? "_features" : "_labels";
  throw cohort::InvalidArgument("--" + name + given + " without --" + name + missing +
                                ": give both files or neither");
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  std::string train_x = FLAGS_train_features, train_y = FLAGS_train_labels;
  std::string test_x = FLAGS_test_features, test_y = FLAGS_test_labels;
  pair_of_flags("train", train_x, train_y);
  pair_of_flags("test", test_x, test_y);
  if (train_x.empty() && !test_x.empty())
    throw cohort::InvalidArgument(
        "--test_features without --train_features: give the training files too");
  if (train_x.empty()) {
    if (FLAGS_export_dir.empty())
      throw cohort::InvalidArgument("--export_dir is empty: give the directory to write Fashion-MNIST's .npy files into");
    // Each replica writes its own copy (the directory may not be shared between nodes).
    const std::string dir = FLAGS_export_dir + "/replica" + std::to_string(server.replica_index());
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw cohort::InvalidArgument("--export_dir=" + FLAGS_export_dir + ": cannot make " + dir + ": " + error.message());
    std::tie(train_x, train_y) = export_npy(cohort::data::Split::kTrain, 12000, dir + "/train");
    std::tie(test_x, test_y) = export_npy(cohort::data::Split::kTest, 2000, dir + "/test");
  }
  // This worker's shard alone is read from the features file (every label is checked).
  const auto train = images(
      cohort::data::dataset_from_npy(train_x, train_y, FLAGS_num_classes,
                                     {server.replica_index(), server.num_replicas()}),
      "train", train_x, train_y);
  const int classes = train.num_classes();
  const auto test = test_x.empty()
                        ? std::optional<cohort::data::Dataset>()
                        : images(cohort::data::dataset_from_npy(test_x, test_y, FLAGS_num_classes),
                                 "test", test_x, test_y);

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  cohort::OptimizerOptions momentum;
  momentum.name = "momentum";
  momentum.learning_rate.base = FLAGS_learning_rate;
  momentum.learning_rate.kind = cohort::LearningRateSchedule::Kind::kCosine;
  momentum.learning_rate.decay_steps = FLAGS_train_steps;
  momentum.learning_rate.decay_rate = 0.01;
  const cohort::Shape example = train.example_shape();
  cohort::Trainer trainer(
      &server, graph, [&](cohort::Graph& g) { return residual_network(g, example, classes); },
      train, cohort::Optimizer::create(momentum), options);
  if (test) cohort::check_dataset(trainer.model(), *test, /*whole=*/true);  // now, not after the whole run

  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .hooks = {cohort::StopAtStepHook::last(FLAGS_train_steps),
                std::make_shared<cohort::NanTensorHook>()}});
  while (!session->should_stop()) session->run();
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    std::printf("residual_npy: %d worker%s, %lld parameters, global step %lld",
                server.num_replicas(), server.num_replicas() == 1 ? "" : "s",
                static_cast<long long>(graph.num_parameters()),
                static_cast<long long>(trainer.read_global_step()));
    if (test) {
      std::printf(", test accuracy %.4f\n", trainer.evaluate(*test).accuracy);
    } else {
      std::printf(", not evaluated (no --test_features and --test_labels)\n");
    }
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
