// A convolutional network trained on the user's own pictures, on any number of workers: a folder
// of PNG and JPEG files with a subfolder per class, as Keras's image_dataset_from_directory and
// torchvision's ImageFolder take them, or TFRecord files of tf.train.Example records holding
// encoded images and labels, as TensorFlow's image pipelines write them:
//
//   photos/train/cat/0001.jpg  photos/train/dog/0002.png  ...   photos/test/cat/...
//   mpirun -np 4 build/bin/example_images --train=photos/train --test=photos/test
//       --height=64 --width=64 --channels=3 --horizontal_flip --checkpoint_dir=ckpt  (one line)
//   build/bin/example_images --train=photos/train --height=64 --width=64 --channels=3
//       --checkpoint_dir=ckpt --predict=new_photos --predictions=labels.csv       (one line)
//   mpirun -np 4 build/bin/example_images --train='records/train-*.tfrecord'
//       --test=records/test.tfrecord --height=64 --width=64                     (one line)
//   mpirun -np 4 build/bin/example_images --train=galaxies_train.h5 --test=galaxies_test.h5
//       --hdf5_images=images --hdf5_labels=ans                                  (one line)
//
// Or an HDF5 file (.h5, .hdf5) of images [n, height, width] or [n, height, width, channels] of
// any number type (--hdf5_images) and integer labels (--hdf5_labels): used at their size, and
// standardised per channel by the whole training set's mean and deviation.
//
// Without --test, --validation_split holds out a fraction of --train to evaluate on (Keras's
// validation_split), chosen by --seed alike on every worker: of a folder's images (of every
// class), of HDF5 arrays or of TFRecord records (each worker then reads the whole set, and keeps
// its shard of the rest).
//
// --train and --test name a folder, or TFRecord files (comma-separated; a name ending in
// .tfrecord or .tfrecords, with .gz or not, or holding a * ? or [ pattern) whose --tfrecord_image feature
// holds a PNG or JPEG image and --tfrecord_label feature an int64 label (classes are then
// named by their numbers). Each worker decodes only its shard of the training images (every
// worker must see the same files), and the chief alone the test images, whose subfolders must
// be among the training set's classes (labels follow the training set's order). Without --height and --width every
// training image must have the first's size; with them each is resized (bilinear). Test images
// are given the training images' size and channels, resized if need be. The network: per
// --filters entry a 3x3 convolution with ReLU (after the first, separable ones with
// --conv=separable) and a 2x2 max-pool, then a dense layer (--hidden units, ReLU), dropout and
// the logits. The chief prints the test accuracy (and writes it with
// the loss to --metrics_json). With --checkpoint_dir the chief restores the latest checkpoint
// there and saves one at the end, so a second run with the same --train_steps trains no further:
// with --predict it then only classifies new images (a folder of them, at any depth, or files;
// TFRecord files' --tfrecord_image feature; with HDF5 arrays, an HDF5 file's --hdf5_images,
// standardised as the training arrays), writing path (or record or row index), class and
// probability per image (the classes are --train's subfolders, or the labels' numbers).
#include <cohort/cohort.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

COHORT_DEFINE_string(train, "",
                     "training images: a folder with a subfolder of images per class, or TFRecord files");
COHORT_DEFINE_string(test, "", "test images, the same way (empty: evaluate on the training images, or on --validation_split's)");
COHORT_DEFINE_float(validation_split, 0,
                    "without --test (with it, not used): hold out this fraction of --train (shuffled by --seed) to evaluate on",
                    cohort::flags::Range{0, 1});
COHORT_DEFINE_string(tfrecord_image, "image/encoded", "TFRecord: the feature holding the encoded image");
COHORT_DEFINE_string(tfrecord_label, "image/class/label", "TFRecord: the int64 feature holding the class label");
COHORT_DEFINE_string(hdf5_images, "images", "HDF5: the dataset of images, [n, height, width] or [n, height, width, channels]");
COHORT_DEFINE_bool(channels_first, false,
                   "HDF5: the images are [n, channels, height, width] (PyTorch's layout): turn them to [n, height, width, channels]");
COHORT_DEFINE_string(hdf5_labels, "labels", "HDF5: the dataset of integer class labels [n]");
COHORT_DEFINE_int(height, 0, "resize every image to this height (0, with --width=0: keep the size)",
                  cohort::flags::Range{0, 1 << 16});
COHORT_DEFINE_int(width, 0, "resize every image to this width", cohort::flags::Range{0, 1 << 16});
COHORT_DEFINE_int(channels, 0, "1 (grey) or 3 (RGB); 0: the first image's",
                  cohort::flags::Range{0, 3});
COHORT_DEFINE_string(filters, "32,64", "filters of each convolution block, comma-separated");
COHORT_DEFINE_string(conv, "standard",
                     "the convolutions after the first block: standard, or separable (depthwise, "
                     "then 1x1: Xception's and MobileNet's)",
                     cohort::flags::Choices{"standard", "separable"});
COHORT_DEFINE_int(hidden, 128, "units of the dense layer before the logits", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_bool(horizontal_flip, false, "mirror training images left-right at random");
COHORT_DEFINE_bool(decode_on_use, false,
                   "decode each image as a batch takes it, keeping only its path (folders) or its encoded bytes (TFRecord)");
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_string(optimizer, "adam", "the optimizer",
                     cohort::flags::Choices{"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"});
COHORT_DEFINE_float(learning_rate, 0.002, "learning rate", cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true});
COHORT_DEFINE_string(lr_schedule, "constant", "the learning rate over training: constant, or after --lr_warmup_steps down to a tenth (cosine, polynomial: linear, exponential)",
                     cohort::flags::Choices{"constant", "cosine", "polynomial", "exponential"});
COHORT_DEFINE_int(lr_warmup_steps, 0, "global steps over which the learning rate rises linearly to its value", cohort::flags::Range{0, 1e12});
COHORT_DEFINE_float(weight_decay, 0.0, "weight decay of kernels: L2, or decoupled with --optimizer=adamw", cohort::flags::Range{0, 1});
COHORT_DEFINE_float(clip_norm, 0.0, "clip gradients to this global norm (0: no clipping)", cohort::flags::Range{0, 1e30});
COHORT_DEFINE_float(dropout, 0.3, "the fraction of the dense layer's units dropped in training", cohort::flags::Range{0, 0.99});
COHORT_DEFINE_float(moving_average_decay, 0.0,
                    "keep a moving average of the parameters with this decay (e.g. 0.99) on the "
                    "chief, and evaluate, checkpoint and predict (given again with --predict) with it (0: none)",
                    cohort::flags::Range{0, 0.999999});
COHORT_DEFINE_string(class_weights, "",
                     "weigh each class's images by balanced (n / (classes x the class's n), over the "
                     "whole training set) or by a weight per class, in the classes' order, separated "
                     "by commas (empty: all 1)");
COHORT_DEFINE_int(batch_size, 32, "examples per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_int(train_steps, 300, "global steps to train (not with --epochs)", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(epochs, 0, "passes over the training images, counted globally, instead of --train_steps (0: --train_steps)",
                  cohort::flags::Range{0, 1e6});
COHORT_DEFINE_int(seed, 1, "seed for initialisation, shuffling, flips and dropout",
                  cohort::flags::Range{0, 1e15});
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore the latest checkpoint from, and save checkpoints to, here");
COHORT_DEFINE_string(predict, "",
                     "chief, after training: images to classify, a folder (every PNG and JPEG in it) or files, comma-separated, "
                     "or TFRecord files (their --tfrecord_image feature)");
COHORT_DEFINE_string(predictions, "", "write the predictions here as CSV (empty: to stdout, after the job's log lines)");
COHORT_DEFINE_string(metrics_json, "", "chief: write the test loss and accuracy to this JSON file");

namespace {

cohort::Model network(cohort::Graph& graph, const cohort::Shape& example, int classes) {
  cohort::Model model(graph);
  cohort::Node x = model.input(example);
  if (example.size() == 2)  // grey images from an HDF5 array [n, height, width]
    x = model.apply(cohort::reshape("channels", {example[0], example[1], 1}), x);
  const std::vector<std::int64_t> filters =
      cohort::flags::parse_size_list("filters", FLAGS_filters, 1 << 16);
  for (std::size_t i = 0; i < filters.size(); ++i) {
    const std::string block = "block" + std::to_string(i + 1);
    // The first block sees few channels, which a separable convolution would hardly mix.
    if (FLAGS_conv == "separable" && i > 0)
      x = model.apply(cohort::separable_conv2d(block + "/conv", filters[i], 3, cohort::Activation::kRelu), x);
    else
      x = model.apply(cohort::conv2d(block + "/conv", filters[i], 3, cohort::Activation::kRelu), x);
    x = model.apply(cohort::max_pool2d(block + "/pool", 2), x);
  }
  x = model.apply(cohort::dense("hidden", FLAGS_hidden, cohort::Activation::kRelu), x);
  x = model.apply(cohort::dropout("dropout", static_cast<float>(FLAGS_dropout)), x);
  model.apply(cohort::dense("logits", classes), x);
  return model;
}

bool is_hdf5(const std::string& spec) { return spec.ends_with(".h5") || spec.ends_with(".hdf5"); }

bool named_tfrecord(const std::string& spec) {
  for (const char* suffix : {".tfrecord", ".tfrecords", ".tfrecord.gz", ".tfrecords.gz"})
    if (spec.ends_with(suffix)) return true;
  return false;
}

bool is_tfrecord(const std::string& spec) {
  return named_tfrecord(spec) || spec.find_first_of("*?[") != std::string::npos;
}

// --predict's images: the PNG and JPEG files under a folder, sorted, or the files given.
std::vector<std::string> images_to_predict() {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  for (const std::string& given : cohort::flags::split_list("predict", FLAGS_predict)) {
    if (!fs::is_directory(given)) {
      if (!fs::exists(given)) throw cohort::InvalidArgument("--predict=" + given + ": no such file or folder");
      if (!cohort::data::is_image_name(given))
        throw cohort::InvalidArgument("--predict=" + given + ": not a .png, .jpg or .jpeg file");
      paths.push_back(given);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(given))
      // As the folder reader: names starting with a dot are passed over.
      if (entry.is_regular_file() && !entry.path().filename().string().starts_with(".") &&
          cohort::data::is_image_name(entry.path().string()))
        found.push_back(entry.path().string());
    if (found.empty()) throw cohort::InvalidArgument("--predict=" + given + ": no .png, .jpg or .jpeg files in it");
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// The trained model's class and its probability (the softmax of the logits) for each of
// `images` (Trainer::predict_probabilities: standardised as the training images were, with the
// moving averages where kept), as CSV rows named by name(i).
void write_classes(cohort::Trainer& trainer, const cohort::Tensor& images, const std::vector<std::string>& classes,
                   const std::function<std::string(std::int64_t)>& name, std::ostream& out) {
  const cohort::Tensor probabilities = trainer.predict_probabilities(images);
  const std::int64_t k = probabilities.dim(1);
  for (std::int64_t i = 0; i < probabilities.dim(0); ++i) {
    const float* row = probabilities.data() + i * k;
    const auto best = static_cast<std::size_t>(std::max_element(row, row + k) - row);
    out << cohort::data::csv_field(name(i)) << "," << cohort::data::csv_field(classes[best]) << "," << row[best] << "\n";
  }
}

// --predict's images decoded (or read) at a time: memory for any number of them is bounded.
constexpr std::int64_t kPredictBatch = 256;

// Classifies image files `paths`, decoded a batch at a time: path, class, probability per image.
std::int64_t predict_files(cohort::Trainer& trainer, const std::vector<std::string>& paths,
                           const cohort::Shape& example, const std::vector<std::string>& classes,
                           std::ostream& out) {
  out << "path,class,probability\n";
  const auto n = static_cast<std::int64_t>(paths.size());
  for (std::int64_t begin = 0; begin < n; begin += kPredictBatch) {
    const std::vector<std::string> batch(paths.begin() + begin, paths.begin() + std::min(n, begin + kPredictBatch));
    const cohort::Tensor images = cohort::data::load_images(batch, example[0], example[1], static_cast<int>(example[2]));
    write_classes(trainer, images, classes, [&](std::int64_t i) { return batch[static_cast<std::size_t>(i)]; }, out);
  }
  return n;
}

// Classifies the encoded images of TFRecord files' --tfrecord_image feature, decoded at the
// training images' size and channels a batch at a time as the records are read: index (over
// the files' records, in order), class, probability per image.
std::int64_t predict_records(cohort::Trainer& trainer, const cohort::Shape& example,
                             const std::vector<std::string>& classes, std::ostream& out) {
  cohort::data::TFRecordOptions records;
  records.features = FLAGS_tfrecord_image;
  records.height = example[0];
  records.width = example[1];
  records.channels = static_cast<int>(example[2]);
  std::int64_t n = 0;
  cohort::data::for_each_tfrecord_batch(
      cohort::flags::split_list("predict", FLAGS_predict), records, kPredictBatch, [&](const cohort::Tensor& images) {
        if (n == 0) out << "index,class,probability\n";
        write_classes(trainer, images, classes, [&](std::int64_t i) { return std::to_string(n + i); }, out);
        n += images.dim(0);
      });
  return n;
}

// Classifies the images of an HDF5 file's dataset --hdf5_images, read a batch of rows at a
// time: index (the row in the file), class, probability per image.
std::int64_t predict_arrays(cohort::Trainer& trainer, const std::string& path, const cohort::Shape& example,
                            const std::vector<std::string>& classes, std::ostream& out) {
  std::int64_t n = 0;
  const auto take = [&](const cohort::data::NpyArray& batch, const cohort::Shape& file_shape) {
    const std::string in = "--predict=" + path + ": dataset '" + FLAGS_hdf5_images + "'";
    cohort::Tensor turned;
    if (FLAGS_channels_first) turned = cohort::data::channels_last(batch.values, in);
    const cohort::Tensor& rows = FLAGS_channels_first ? turned : batch.values;
    cohort::Shape shape = file_shape;
    if (FLAGS_channels_first && shape.size() == 4) shape = {shape[0], shape[2], shape[3], shape[1]};
    if (n == 0) {
      if (shape.size() != example.size() + 1 || !std::equal(example.begin(), example.end(), shape.begin() + 1))
        throw cohort::InvalidArgument(in + " holds " + cohort::to_string(shape) +
                                      ", not images of the training images' shape " + cohort::to_string(example));
      if (shape[0] == 0) throw cohort::InvalidArgument(in + " is empty");
      out << "index,class,probability\n";
    }
    write_classes(trainer, rows, classes, [&](std::int64_t i) { return std::to_string(n + i); }, out);
    n += rows.dim(0);
  };
  cohort::data::for_each_hdf5_batch(path, FLAGS_hdf5_images, kPredictBatch, take);
  return n;
}

// The images of --`what` (train or test), `spec`: `layout.shard`'s part, of `layout`'s size and
// channels (0: the first image's); with `classes` given (a test set), labelled by them, else
// `classes` gets the set's. With a validation split of arrays or records, `held_out` (where
// given) gets the whole validation part of the same read.
cohort::data::Dataset load(const std::string& what, const std::string& spec,
                           cohort::data::ImageFolderOptions layout, std::vector<std::string>& classes,
                           std::optional<cohort::data::Dataset>* held_out = nullptr) {
  // A folder splits itself; arrays and records split here, the same way (Dataset::split, by
  // --seed): every worker reads the whole set, and keeps its shard of the training part.
  const bool split = layout.validation_split > 0;
  const auto part = [&](cohort::data::Dataset whole) {
    if (!split) return whole;
    if (held_out != nullptr) *held_out = whole.split_part(layout.validation_split, layout.seed, true);
    const bool validation = layout.subset == cohort::data::ImageFolderOptions::Subset::kValidation;
    return whole.split_part(layout.validation_split, layout.seed, validation, layout.shard.index, layout.shard.count);
  };
  const cohort::data::ShardSpec shard = split ? cohort::data::ShardSpec{} : layout.shard;
  if (is_hdf5(spec)) {
    const std::string in = "--" + what + "=" + spec + ": dataset '" + FLAGS_hdf5_images + "'";
    cohort::data::Dataset data = cohort::data::dataset_from_hdf5(
        spec, FLAGS_hdf5_images, FLAGS_hdf5_labels, static_cast<int>(classes.size()), shard);
    if (FLAGS_channels_first) data = cohort::data::channels_last(data, in);
    else cohort::data::check_not_channels_first(data.example_shape(), in, "give --channels_first to turn them");
    data = part(std::move(data));
    const cohort::Shape shape = data.example_shape();
    if (!data.has_labels() || (shape.size() != 2 && shape.size() != 3))
      throw cohort::InvalidArgument(in + " holds examples of shape " + cohort::to_string(shape) +
                                    " with " + (data.has_labels() ? "labels" : "float targets") +
                                    ": expected images [height, width] or [height, width, channels] "
                                    "and integer labels");
    // The arrays are used at their size: a test set must have the training set's.
    cohort::Shape want = {layout.height, layout.width};
    if (layout.channels > 0) want.push_back(layout.channels);
    if (layout.height > 0 && shape != want)
      throw cohort::InvalidArgument(in + " holds images of shape " + cohort::to_string(shape) +
                                    ", not the training images' " + cohort::to_string(want));
    if (classes.empty())
      for (int c = 0; c < data.num_classes(); ++c) classes.push_back(std::to_string(c));
    return data;
  }
  if (!is_tfrecord(spec)) {
    layout.class_names = classes;
    return cohort::data::load_image_folder(spec, layout, &classes);
  }
  cohort::data::TFRecordOptions records;
  records.features = FLAGS_tfrecord_image;
  records.label = FLAGS_tfrecord_label;
  records.num_classes = static_cast<int>(classes.size());  // 0: count them
  records.height = layout.height;
  records.width = layout.width;
  records.channels = layout.channels;
  records.shard = shard;
  records.in_memory = layout.in_memory;
  cohort::data::Dataset data =
      part(cohort::data::load_tfrecord(cohort::flags::split_list(what, spec), records));
  if (classes.empty())
    for (int c = 0; c < data.num_classes(); ++c) classes.push_back(std::to_string(c));
  return data;
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  if (FLAGS_epochs > 0 && cohort::flags::Registry::global().given("train_steps"))
    throw cohort::InvalidArgument("--epochs=" + std::to_string(FLAGS_epochs) + " with --train_steps=" +
                                  std::to_string(FLAGS_train_steps) + ": give one");
  const cohort::ClusterSpec cluster = cohort::cluster_from_flags();
  cohort::Server server(cluster);
  if (!server.is_computing()) {
    server.join();
    return 0;
  }
  if (FLAGS_train.empty()) throw cohort::InvalidArgument("--train is required");
  // The chief writes its results at the end: paths that cannot be written end the job now.
  if (server.is_chief())
    cohort::check_outputs({{"--predictions", FLAGS_predictions}, {"--metrics_json", FLAGS_metrics_json}},
                          {{"--train", FLAGS_train}, {"--test", FLAGS_test}, {"--predict", FLAGS_predict}});
  const bool arrays = is_hdf5(FLAGS_train);
  if (arrays && (FLAGS_height > 0 || FLAGS_width > 0 || FLAGS_channels > 0))
    throw cohort::InvalidArgument("--height, --width and --channels: for decoded images; --train=" +
                                  FLAGS_train + " is an HDF5 file, whose images are used at their size");
  if (!FLAGS_predict.empty() && arrays != is_hdf5(FLAGS_predict))
    throw cohort::InvalidArgument("--predict=" + FLAGS_predict + " and --train=" + FLAGS_train +
                                  ": both HDF5 files or neither (HDF5 arrays are standardised, "
                                  "decoded images are not)");
  if (arrays && FLAGS_test.empty() && FLAGS_validation_split == 0)
    throw cohort::InvalidArgument("--test or --validation_split is required with an HDF5 --train=" +
                                  FLAGS_train + " (the arrays are standardised by the training set's "
                                  "statistics, so it cannot be its own test set)");
  if (!FLAGS_test.empty() && is_hdf5(FLAGS_test) != arrays)
    throw cohort::InvalidArgument("--test=" + FLAGS_test + " and --train=" + FLAGS_train +
                                  ": both HDF5 files or neither (HDF5 arrays are standardised, "
                                  "decoded images are not)");
  // Images to classify that are not there, or not images, end the job now, not after training.
  // Records: named as such, or a pattern beside records to train on (a folder's name may hold '[').
  const bool predict_records_named =
      named_tfrecord(FLAGS_predict) || (is_tfrecord(FLAGS_predict) && is_tfrecord(FLAGS_train));
  std::vector<std::string> image_files;  // the chief's, to classify
  if (server.is_chief() && !FLAGS_predict.empty() && !arrays && !predict_records_named)
    image_files = images_to_predict();
  if (!arrays && FLAGS_channels_first)
    throw cohort::InvalidArgument("--channels_first: for HDF5 arrays; --train=" + FLAGS_train +
                                  " holds encoded images, which are read channels-last");
  if (arrays && FLAGS_decode_on_use)
    throw cohort::InvalidArgument("--decode_on_use: for encoded images; --train=" + FLAGS_train +
                                  " is an HDF5 file of arrays, held in memory");
  cohort::data::ImageFolderOptions read;
  read.height = FLAGS_height;
  read.width = FLAGS_width;
  read.channels = FLAGS_channels;
  read.shard = {server.replica_index(), server.num_replicas()};
  read.in_memory = !FLAGS_decode_on_use;
  if (FLAGS_test.empty() && FLAGS_validation_split > 0) {
    read.validation_split = FLAGS_validation_split;
    read.seed = static_cast<std::uint64_t>(FLAGS_seed);
  }
  std::vector<std::string> classes;
  // The chief's held-out part of arrays or records, from the read that gives its training part.
  std::optional<cohort::data::Dataset> held_out;
  const cohort::data::Dataset train =
      load("train", FLAGS_train, read, classes, server.is_chief() ? &held_out : nullptr);
  const std::int64_t examples = server.replicas().allreduce(train.size());
  if (examples == 0) throw cohort::InvalidArgument("--train=" + FLAGS_train + ": no images in it");
  // Workers that listed different folders (a copy per node that differs) would train on shards
  // of different sets, or build models of different sizes and hang: compare the class lists.
  const int classes_found = static_cast<int>(classes.size());
  // The same for the images' shape (the first image's, or an HDF5 array's).
  std::vector<std::int64_t> dims = train.example_shape();
  dims.resize(3, 0);
  std::vector<std::int64_t> least = dims, most = dims;
  server.replicas().allreduce(std::span<std::int64_t>(least), cohort::mpi::Op::kMin);
  server.replicas().allreduce(std::span<std::int64_t>(most), cohort::mpi::Op::kMax);
  if (least != most)
    throw cohort::InvalidArgument("--train=" + FLAGS_train + ": the workers found images of different "
                                  "shapes (this one " + cohort::to_string(train.example_shape()) +
                                  "): do they all see the same files?");
  if (server.replicas().allreduce(classes_found, cohort::mpi::Op::kMax) != classes_found ||
      server.replicas().allreduce(classes_found, cohort::mpi::Op::kMin) != classes_found)
    throw cohort::InvalidArgument("--train=" + FLAGS_train + ": the workers found different "
                                  "numbers of classes (this one " +
                                  std::to_string(classes_found) + "): do they all see the same folder?");
  if (classes_found < 2)
    throw cohort::InvalidArgument("--train=" + FLAGS_train + ": one class (" + classes.front() +
                                  "): a classifier needs two or more");
  std::optional<cohort::data::Dataset> test;
  if (server.is_chief()) {
    // The training set's size and channels (which the first image may have decided) and classes.
    read.shard = {};
    read.height = train.example_shape()[0];
    read.width = train.example_shape()[1];
    read.channels = train.example_shape().size() == 3 ? static_cast<int>(train.example_shape()[2]) : 0;
    read.subset = cohort::data::ImageFolderOptions::Subset::kValidation;  // with a split
    if (held_out) test = std::move(held_out);
    else if (FLAGS_test.empty()) test = load("train", FLAGS_train, read, classes);  // a folder's split, or all
    else test = load("test", FLAGS_test, read, classes);
  }

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.seed = static_cast<std::uint64_t>(FLAGS_seed);
  options.image.horizontal_flip = FLAGS_horizontal_flip;
  options.moving_average_decay = FLAGS_moving_average_decay;
  if (arrays) {
    // Arrays of any range (bytes, counts, fluxes): standardised by the whole training set's
    // statistics per channel (one for all of a grey [n, height, width] array), summed over
    // every worker's shard, in training and evaluation alike.
    cohort::data::FeatureSums sums = cohort::data::feature_sums(train);
    if (train.example_shape().size() == 2) {
      if (FLAGS_horizontal_flip)
        throw cohort::InvalidArgument("--horizontal_flip: the images of --train=" + FLAGS_train +
                                      " have no channel axis ([n, height, width]); give them one");
      sums.pool();
    }
    cohort::ReplicaSum workers(server.replicas());
    sums.add_over(workers);
    sums.moments(options.image.mean, options.image.std);
    if (test && !FLAGS_test.empty())
      if (const std::string fault = cohort::data::scale_mismatch(sums, *test); !fault.empty())
        std::fprintf(stderr, "warning: --test=%s: %s\n", FLAGS_test.c_str(), fault.c_str());
  }
  options.replication.mode = cohort::parse_mode(FLAGS_mode);
  // --epochs counted globally: a global step takes every worker's batch in allreduce mode.
  // (A job resumed at another global batch plans the rest of its epochs in this run's steps.)
  const std::int64_t train_steps =
      FLAGS_epochs > 0 ? options.steps_for_epochs(FLAGS_epochs, examples, server.num_replicas(),
                                                  cohort::resume_point(server, FLAGS_checkpoint_dir, options))
                       : FLAGS_train_steps;
  cohort::OptimizerOptions optimizer;
  optimizer.name = FLAGS_optimizer;
  optimizer.learning_rate = cohort::LearningRateSchedule::for_run(FLAGS_lr_schedule, FLAGS_learning_rate, train_steps,
                                                               FLAGS_lr_warmup_steps);
  optimizer.weight_decay = FLAGS_weight_decay;
  optimizer.clip_norm = FLAGS_clip_norm;
  if (server.is_chief())
    std::printf("images: %lld global steps, %s, learning rate %g (%s)\n", static_cast<long long>(train_steps),
                cohort::describe(optimizer).c_str(), FLAGS_learning_rate, FLAGS_lr_schedule.c_str());
  const cohort::Shape example = train.example_shape();
  const int num_classes = train.num_classes();
  // --class_weights: as given, or balanced over every worker's labels.
  std::vector<float> class_weights;
  if (!FLAGS_class_weights.empty()) {
    cohort::ReplicaSum workers(server.replicas());
    class_weights = cohort::data::class_weights(FLAGS_class_weights, train, &workers, "--class_weights");
    if (server.is_chief()) std::printf("%s\n", cohort::data::describe_class_weights(class_weights).c_str());
  }
  cohort::Trainer trainer(
      &server, graph,
      [&](cohort::Graph& g) {
        cohort::Model model = [&] {
          try {
            return network(g, example, num_classes);
          } catch (const cohort::InvalidArgument& e) {  // a layer's own words, after the data's
            throw cohort::InvalidArgument("--train=" + FLAGS_train + ": images of " + cohort::to_string(example) +
                                          " do not fit the network: " + e.what());
          }
        }();
        if (!class_weights.empty())
          model.set_loss(std::make_unique<cohort::SoftmaxCrossEntropyLoss>(0.0f, class_weights));
        return model;
      },
      train, cohort::Optimizer::create(optimizer), options);
  if (test) cohort::check_dataset(trainer.model(), *test, /*whole=*/true);  // now, not after the whole run

  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      // Epochs count examples, so that a job resumed with other workers trains the rest of them.
      .hooks = {FLAGS_epochs > 0 ? cohort::StopAtStepHook::after_examples(FLAGS_epochs * examples)
                                  : cohort::StopAtStepHook::last(train_steps),
                std::make_shared<cohort::NanTensorHook>()},
      .settings = {{"classes", cohort::data::csv_row(classes)}}});  // a resumed job's must be the same
  while (!session->should_stop()) session->run();
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    const cohort::StepMetrics m = trainer.evaluate(*test);
    // The set evaluated on: --test, --validation_split's part of --train, or all of --train.
    const char* set = !FLAGS_test.empty() ? "test" : FLAGS_validation_split > 0 ? "validation" : "training-set";
    std::printf(
        "images: %d worker%s, %lld images of %s in %d classes%s, global step %lld, "
        "%s loss %.4f, %s accuracy %.4f\n",
        server.num_replicas(), server.num_replicas() == 1 ? "" : "s",
        static_cast<long long>(examples), cohort::to_string(example).c_str(), num_classes,
        train.in_memory() ? "" : " (decoded on use)", static_cast<long long>(trainer.read_global_step()),
        set, m.loss, set, m.accuracy);
    if (!FLAGS_metrics_json.empty())
      cohort::write_json_object(FLAGS_metrics_json, {{"loss", m.loss}, {"accuracy", m.accuracy},
                                                     {"test_examples", test->size()}});
    if (!FLAGS_predict.empty()) {
      const auto predict = [&](std::ostream& out) {
        if (arrays) return predict_arrays(trainer, FLAGS_predict, example, classes, out);
        if (predict_records_named) return predict_records(trainer, example, classes, out);
        return predict_files(trainer, image_files, example, classes, out);
      };
      if (FLAGS_predictions.empty()) {
        predict(std::cout);
      } else {
        std::ofstream out(FLAGS_predictions);
        const std::int64_t count = predict(out);
        if (!out.flush()) throw cohort::Error("cannot write --predictions=" + FLAGS_predictions);
        std::printf("images: %lld predictions written to %s\n", static_cast<long long>(count),
                    FLAGS_predictions.c_str());
      }
    }
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
