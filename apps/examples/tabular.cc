// A model trained on the user's own data, from CSV, NumPy or TFRecord files: a table of numbers
// through a multi-layer perceptron, or sequences (examples [steps, features], or [steps] token
// ids with --vocabulary) through 1-D convolutions, an LSTM, a GRU, a bidirectional LSTM or a
// Transformer encoder (--model); classification (a column of class labels, softmax
// cross-entropy), multi-label (several 0/1 target columns, sigmoid cross-entropy) or regression
// (float target columns, mean squared error), on any number of workers:
//
//   mpirun -np 4 build/bin/example_tabular --train=houses.csv --test=houses_test.csv
//       --target_columns=price --loss=mean_squared_error                       (one line)
//   mpirun -np 4 build/bin/example_tabular --train=x.npy,y.npy --test=xt.npy,yt.npy
//       --loss=sigmoid_cross_entropy                                           (one line)
//   mpirun -np 4 build/bin/example_tabular --train=ids.npy,labels.npy --vocabulary=20000
//       --model=bilstm                                                         (one line)
//   mpirun -np 4 build/bin/example_tabular --train=weather.csv --target_columns=temp_next
//       --window=24 --horizon=0 --model=lstm --loss=mse                        (one line)
//
// --window reads a file's rows as one time series (Keras's timeseries_dataset_from_array): each
// example is that many consecutive rows, its target (or label) that of the row --horizon after
// the window's last (0 above: temp_next already holds the next row's temperature). --predict
// then forecasts from every window of its file's rows, the last window's forecast being for
// --horizon rows past its end.
//
// --standardize scales each feature (the examples' last axis, at every step alike) by the training
// data's mean and standard deviation, --standardize_targets a regression's targets (the
// predictions and metrics scaled back); the checkpoints keep the statistics. --mask_zero takes
// the steps that are 0 (a token id 0, or a step of zeros) for padding: sequences of different
// lengths, padded at either end, are read as their own steps alone.
// --train and --test name a .csv (or .csv.gz) file, a pair "features.npy,targets.npy", a .npz
// archive or an HDF5 file (.h5, .hdf5) holding arrays "x" and "y" (--features_key,
// --targets_key), or TFRecord files of tf.train.Example records (a name
// ending in .tfrecord or .tfrecords, with .gz or not, or a pattern such as
// 'data/part-*.tfrecord'): their
// --tfrecord_features feature holds the features, --label_column names the label feature or
// --target_columns the one target feature. A CSV file's features are every other column, or
// those of --feature_columns, or all but --ignore_columns (an id, a date, text); a test CSV's
// columns are matched to the training file's by name.
// Each worker reads only its shard of the training data, and the chief alone the test data
// (without --test: the training data, whole). The model's input takes the data's example shape
// (--input_shape, if given, must hold as many values: a CSV row of 64 read as [8, 8] steps and
// features with --input_shape=8,8). Both sets are checked against the model before
// training. The chief prints the loss and metrics on the set it evaluates, named "test",
// "validation" or "training-set", and writes them to --metrics_json; with --predict it then
// predicts for new examples (a CSV file with the training file's feature columns, or a features
// array), standardised as in training, and writes them as CSV.
#include <cohort/cohort.h>

#include "tabular_predict.h"
#include "tabular_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

COHORT_DEFINE_string(train, "", "training data: FILE.csv, FEATURES.npy,TARGETS.npy, FILE.npz, FILE.h5 (or .hdf5) or TFRecord files");
COHORT_DEFINE_string(features_key, "x", ".npz or HDF5: the array holding the features (in HDF5 a path, as group/x)");
COHORT_DEFINE_string(targets_key, "y", ".npz or HDF5: the array holding the labels or targets");
COHORT_DEFINE_string(tfrecord_features, "x", "TFRecord: the feature holding each example's features");
COHORT_DEFINE_string(test, "", "test data, in the same form (empty: evaluate on the training data, or on --validation_split's part of it)");
COHORT_DEFINE_float(validation_split, 0.0,
                    "without --test: hold out this fraction of the training data, chosen by --seed, to evaluate on (Keras's validation_split)",
                    cohort::flags::Range{0, 0.99});
COHORT_DEFINE_int(seed, 1, "--validation_split's choice of examples", cohort::flags::Range{0, 1e15});
COHORT_DEFINE_int(eval_every_steps, 0,
                  "chief: evaluate on the test (or held-out) data every N global steps, as an eval run beside the summaries (0: at the end only)",
                  cohort::flags::Range{0, 1e15});
COHORT_DEFINE_int(patience, 0, "with --eval_every_steps: stop after this many evaluations without a lower loss (0: never)",
                  cohort::flags::Range{0, 1e9});
COHORT_DEFINE_float(min_delta, 0.0, "with --patience or --reduce_lr_patience: a lower loss must be lower by more than this",
                    cohort::flags::Range{0, 1e30});
COHORT_DEFINE_int(reduce_lr_patience, 0,
                  "with --eval_every_steps: multiply the learning rate by --reduce_lr_factor after this many evaluations without a lower loss (Keras's ReduceLROnPlateau; 0: never)",
                  cohort::flags::Range{0, 1e9});
COHORT_DEFINE_float(reduce_lr_factor, 0.1, "with --reduce_lr_patience: the factor", cohort::flags::Range{1e-6, 0.999999});
COHORT_DEFINE_string(best_dir, "", "with --eval_every_steps: keep a checkpoint of the parameters with the lowest loss here");
COHORT_DEFINE_bool(restore_best, false,
                   "with --best_dir: evaluate and predict with the best evaluation's parameters, not the last step's (Keras's restore_best_weights)");
COHORT_DEFINE_string(label_column, "",
                     "CSV: the column of class labels (a name, or a 0-based index), class indices or class names; TFRecord: the int64 label feature");
COHORT_DEFINE_string(target_columns, "",
                     "CSV: comma-separated columns of float targets; TFRecord: the one feature of float targets");
COHORT_DEFINE_string(feature_columns, "",
                     "CSV: the feature columns, comma-separated (empty: every column that is not the label, a target or in --ignore_columns)");
COHORT_DEFINE_string(ignore_columns, "",
                     "CSV: columns that are not features, comma-separated: an id, a date, text (not read)");
COHORT_DEFINE_bool(csv_header, true, "CSV: the first row names the columns");
COHORT_DEFINE_string(csv_delimiter, ",", "CSV: the character between fields");
COHORT_DEFINE_string(loss, "softmax_cross_entropy", "the loss (and its default metrics)",
                     cohort::flags::Choices{"softmax_cross_entropy", "sigmoid_cross_entropy", "focal",
                                            "categorical_cross_entropy", "mean_squared_error",
                                            "mse", "mean_absolute_error", "mae", "huber"});
COHORT_DEFINE_float(huber_delta, 1.0, "--loss=huber: where the loss turns from squared to linear", cohort::flags::Range{1e-6, 1e9});
COHORT_DEFINE_float(focal_gamma, 2.0, "--loss=focal: how fast an easy example's loss fades ((1 - p_t)^gamma; 0: none)",
                    cohort::flags::Range{0, 100});
COHORT_DEFINE_float(focal_alpha, 0.25, "--loss=focal: the positive targets' weight, the negatives' 1 - alpha (below 0: none)",
                    cohort::flags::Range{-1, 1});
COHORT_DEFINE_string(class_weights, "",
                     "softmax_cross_entropy: weigh each class's examples by balanced (n / (classes x "
                     "the class's n), over the whole training set) or by a weight per class, separated "
                     "by commas (empty: all 1)");
COHORT_DEFINE_string(pos_weight, "",
                     "sigmoid_cross_entropy: weigh each output's positive targets by balanced (its "
                     "negatives over its positives, over the whole training set) or by a weight, one "
                     "for all outputs or one per output, separated by commas (empty: 1)");
COHORT_DEFINE_string(metrics, "",
                     "metrics beside the loss's own, comma-separated: accuracy, top<k>_accuracy, binary_accuracy, categorical_accuracy, mse, mae, precision, recall, f1, auc, pr_auc (of class 1; recall@3: of class 3; recall@fraud: of the class so named, where the labels are names; of a sigmoid's outputs: over all of them, micro-averaged)");
COHORT_DEFINE_int(window, 0,
                  "read the rows as one time series: each example is --window consecutive rows, its target (or label) the row --horizon after its last (0: each row an example); "
                  "with --horizon 1 or more, target columns may be features too (--feature_columns), and are where no other column is",
                  cohort::flags::Range{0, 1 << 20});
COHORT_DEFINE_int(horizon, 1, "with --window: how many rows after a window's last row its target is (0: that row's own)",
                  cohort::flags::Range{0, 1 << 20});
COHORT_DEFINE_string(model, "mlp", "the model: mlp (--hidden), or over sequences conv1d, lstm, gru, bilstm or transformer (--units)",
                     cohort::flags::Choices{"mlp", "conv1d", "lstm", "gru", "bilstm", "transformer"});
COHORT_DEFINE_string(hidden, "64,64", "mlp: hidden layer sizes, comma-separated (ReLU)");
COHORT_DEFINE_int(units, 64, "sequence models: filters of each convolution, units of the recurrent layers, width of the Transformer",
                  cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_int(vocabulary, 0, "the features are token ids below this: an Embedding of --embedding_dim turns each into a vector (0: the features are values)",
                  cohort::flags::Range{0, 1 << 24});
COHORT_DEFINE_int(embedding_dim, 32, "with --vocabulary: the length of each token's vector", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_bool(mask_zero, false,
                   "lstm, gru, bilstm, transformer: a step that is 0 (its id, or every feature) is padding, which the model skips (Keras's mask_zero and Masking)");
COHORT_DEFINE_string(input_shape, "",
                     "the shape the model reads each example in, e.g. 8 or 4,4: the data's, or of as many values, "
                     "reshaped (flat rows as steps,features for a sequence model; empty: the data's)");
COHORT_DEFINE_string(mode, "allreduce", "how workers combine updates (sync, async, ssp need --ps_tasks)",
                     cohort::flags::Choices{"sync", "async", "ssp", "allreduce"});
COHORT_DEFINE_string(optimizer, "adam", "the optimizer",
                     cohort::flags::Choices{"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"});
COHORT_DEFINE_float(learning_rate, 0.01, "learning rate", cohort::flags::Range{.min = 0, .max = 1e3, .min_excluded = true});
COHORT_DEFINE_string(lr_schedule, "constant", "the learning rate over training: constant, or after --lr_warmup_steps down to a tenth (cosine, polynomial: linear, exponential)",
                     cohort::flags::Choices{"constant", "cosine", "polynomial", "exponential"});
COHORT_DEFINE_int(lr_warmup_steps, 0, "global steps over which the learning rate rises linearly to its value", cohort::flags::Range{0, 1e12});
COHORT_DEFINE_float(weight_decay, 0.0, "weight decay of kernels: L2, or decoupled with --optimizer=adamw", cohort::flags::Range{0, 1});
COHORT_DEFINE_float(clip_norm, 0.0, "clip gradients to this global norm (0: no clipping)", cohort::flags::Range{0, 1e30});
COHORT_DEFINE_float(moving_average_decay, 0.0,
                    "keep a moving average of the parameters with this decay (e.g. 0.99) on the "
                    "chief, and evaluate, checkpoint with it (0: none)",
                    cohort::flags::Range{0, 0.999999});
COHORT_DEFINE_int(batch_size, 32, "examples per worker step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_int(train_steps, 500, "global steps to train (not with --epochs)", cohort::flags::Range{1, 1e12});
COHORT_DEFINE_int(epochs, 0, "passes over the training examples, counted globally, instead of --train_steps (0: --train_steps)",
                  cohort::flags::Range{0, 1e6});
COHORT_DEFINE_string(metrics_json, "", "chief: write the test loss and metrics to this JSON file");
COHORT_DEFINE_string(checkpoint_dir, "", "chief: restore the latest checkpoint from, and save checkpoints to, here");
COHORT_DEFINE_string(predict, "",
                     "chief, after training (or restored from --checkpoint_dir at --train_steps): predict for the examples of "
                     "this file (FILE.csv with the training file's feature columns, FEATURES.npy, or FILE.npz or FILE.h5 with "
                     "--features_key); with --window, for every window of its rows read as one series");
COHORT_DEFINE_string(predictions, "", "write --predict's predictions here as CSV (empty: to stdout, after the job's log lines)");
COHORT_DEFINE_bool(standardize, false,
                   "scale each feature to mean 0 and standard deviation 1, by the training data's "
                   "(all workers' shards), in training and evaluation");
COHORT_DEFINE_bool(standardize_targets, false,
                   "regression (mse, mae, huber): train on the targets scaled to mean 0 and standard deviation 1 by the "
                   "training data's; the predictions and the metrics (mse, mae) are of the outputs scaled back, in the "
                   "targets' own units, the loss (and --huber_delta) of the scaled targets");

namespace {

using tabular::check_predict_file;
using tabular::csv_options;
using tabular::ends_with;
using tabular::is_csv;
using tabular::predict;
using tabular::ScaledOutputsMetric;
using tabular::ScaledTargetsLoss;
using tabular::TargetScale;
using tabular::restore_moments;
using tabular::values_text;

// What reading the training file settles for every other file of its table: a CSV file's feature
// columns, and the classes of its labels: by name (CSV), or (empty) their count.
struct CsvTable {
  std::vector<std::string> features;
  std::vector<std::string> classes;
  int num_classes = 0;
};

// What the checkpoints' parameters mean beyond their shapes: the data's preparation (with
// --standardize, the training data's mean and deviation of each feature, `features`; with
// --standardize_targets, of each target value, `targets`) and, from a CSV file, the feature
// and target columns and class names. A resumed job must mean the same.
std::map<std::string, std::string> settings(const CsvTable& table, const cohort::data::ImageOptions& features,
                                            const TargetScale& targets) {
  std::map<std::string, std::string> settings =
      FLAGS_window > 0 ? cohort::flags::flag_values({"standardize", "standardize_targets", "window", "horizon"})
                       : cohort::flags::flag_values({"standardize", "standardize_targets"});
  if (!table.features.empty()) settings.emplace("feature columns", cohort::data::csv_row(table.features));
  // Their order is the outputs': two targets swapped would be predicted under each other's names.
  const std::vector<std::string> target_columns = cohort::flags::split_list("target_columns", FLAGS_target_columns);
  if (!table.features.empty() && !target_columns.empty()) settings.emplace("target columns", cohort::data::csv_row(target_columns));
  if (!table.classes.empty()) settings.emplace("classes", cohort::data::csv_row(table.classes));
  if (FLAGS_standardize) {
    settings.emplace("feature mean", values_text(features.mean));
    settings.emplace("feature std", values_text(features.std));
  }
  if (FLAGS_standardize_targets) {
    settings.emplace("target mean", values_text(targets.mean));
    settings.emplace("target std", values_text(targets.std));
  }
  return settings;
}

// The dataset named by a --train or --test value, or `shard`'s part of it (the other rows' values
// are never held). A CSV file's feature columns: given (a test file read with the training
// file's, matched by name), else every other column, and returned.
cohort::data::Dataset load(const std::string& what, const std::string& spec, CsvTable& table,
                           cohort::data::ShardSpec shard = {}) {
  if (is_csv(spec)) {
    if (FLAGS_label_column.empty() && FLAGS_target_columns.empty())
      throw cohort::InvalidArgument("--" + what + "=" + spec +
                                    ": a CSV file needs --label_column (class labels) or --target_columns "
                                    "(float targets): the column(s) to learn");
    if (!FLAGS_feature_columns.empty() && !FLAGS_ignore_columns.empty())
      throw cohort::InvalidArgument("--feature_columns and --ignore_columns: give one of them");
    // The training file's features: as given, or its columns less the label, the targets and
    // those ignored; a test file's are then the training file's, matched by name.
    const bool first = table.features.empty();
    cohort::data::CsvOptions csv =
        csv_options(first ? cohort::flags::split_list("feature_columns", FLAGS_feature_columns) : table.features);
    if (first) csv.ignore_columns = cohort::flags::split_list("ignore_columns", FLAGS_ignore_columns);
    csv.label_column = FLAGS_label_column;
    csv.target_columns = cohort::flags::split_list("target_columns", FLAGS_target_columns);
    // A window's target is of a later row than any of its own: a series may be its own feature.
    csv.targets_as_features = FLAGS_window > 0 && FLAGS_horizon > 0;
    csv.class_names = table.classes;
    if (table.classes.empty()) csv.num_classes = table.num_classes;  // indices, as the training file's
    csv.shard = shard;
    cohort::data::Dataset data = cohort::data::load_csv(spec, csv, &table.features, &table.classes);
    if (data.has_labels()) table.num_classes = data.num_classes();
    return data;
  }
  // Class labels are counted in the training file, read first; a second read of it (the chief's
  // whole file, to evaluate on) and a test file are held to its count, and do not warn again
  // of a class without examples.
  const auto classes_of = [&](cohort::data::Dataset data) {
    if (data.has_labels() && table.num_classes == 0) table.num_classes = data.num_classes();
    return data;
  };
  if (ends_with(spec, ".npz"))
    return classes_of(
        cohort::data::dataset_from_npz(spec, FLAGS_features_key, FLAGS_targets_key, table.num_classes, shard));
  if (ends_with(spec, ".h5") || ends_with(spec, ".hdf5"))
    return classes_of(
        cohort::data::dataset_from_hdf5(spec, FLAGS_features_key, FLAGS_targets_key, table.num_classes, shard));
  if (ends_with(spec, ".tfrecord") || ends_with(spec, ".tfrecords") ||
      ends_with(spec, ".tfrecord.gz") || ends_with(spec, ".tfrecords.gz") ||
      spec.find_first_of("*?[") != std::string::npos) {
    cohort::data::TFRecordOptions records;
    records.features = FLAGS_tfrecord_features;
    records.label = FLAGS_label_column;
    if (FLAGS_label_column.empty()) {
      const std::vector<std::string> targets = cohort::flags::split_list("target_columns", FLAGS_target_columns);
      if (targets.size() != 1)
        throw cohort::InvalidArgument("--target_columns=" + FLAGS_target_columns +
                                      ": TFRecord data takes one target feature (or --label_column)");
      records.target = targets[0];
    }
    records.shard = shard;
    records.num_classes = table.num_classes;
    return classes_of(cohort::data::load_tfrecord(cohort::flags::split_list(what, spec), records));
  }
  const std::vector<std::string> files = cohort::flags::split_list(what, spec);
  if (files.size() != 2)
    throw cohort::InvalidArgument("--" + what + "=" + spec +
                                  ": expected FILE.csv, FEATURES.npy,TARGETS.npy, FILE.npz, FILE.h5 or TFRecord files");
  return classes_of(cohort::data::dataset_from_npy(files[0], files[1], table.num_classes, shard));
}

// The training data's mean and deviation of each target value (all workers' shards), or a
// checkpoint's (restore_moments), with --standardize_targets; without it none, and a warning
// where a regression's targets lie far from the unit scale a model's outputs start at.
// Collective over the replicas.
TargetScale target_scale(const cohort::Server& server, const cohort::data::Dataset& train,
                         const cohort::TargetSpec& targets) {
  const bool regression = !targets.labels && (FLAGS_loss == "mean_squared_error" || FLAGS_loss == "mse" ||
                                              FLAGS_loss == "mean_absolute_error" || FLAGS_loss == "mae" ||
                                              FLAGS_loss == "huber");
  if (FLAGS_standardize_targets && !regression)
    throw cohort::InvalidArgument("--standardize_targets: for float targets and a regression loss (mse, mae, "
                                  "huber), not --loss=" + FLAGS_loss + (targets.labels ? " of class labels" : ""));
  TargetScale scale;
  if (!regression) return scale;
  cohort::data::FeatureSums sums;
  const std::int64_t k = train.target_size();
  sums.count = train.size();
  sums.sum.assign(static_cast<std::size_t>(k), 0.0);
  sums.sum_squares.assign(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    const std::span<const float> t = train.target(i);
    for (std::size_t j = 0; j < t.size(); ++j) {
      sums.sum[j] += t[j];
      sums.sum_squares[j] += static_cast<double>(t[j]) * t[j];
    }
  }
  cohort::ReplicaSum workers(server.replicas());
  sums.add_over(workers);
  if (sums.count == 0) return scale;  // the data's check names the empty set
  sums.moments(scale.mean, scale.std);
  if (FLAGS_standardize_targets) {
    restore_moments(server, FLAGS_checkpoint_dir, FLAGS_train, "target", "standardize_targets", scale.mean,
                    scale.std);
    return scale;
  }
  // The target farthest from the unit scale, named as --target_columns names it.
  std::size_t far = 0;
  for (std::size_t j = 0; j < scale.mean.size(); ++j)
    if (std::max(std::abs(scale.mean[j]), scale.std[j]) > std::max(std::abs(scale.mean[far]), scale.std[far])) far = j;
  if (server.is_chief() && (std::abs(scale.mean[far]) > 100 || scale.std[far] > 100)) {
    const std::vector<std::string> names = cohort::flags::split_list("target_columns", FLAGS_target_columns);
    const std::string name = names.size() == scale.mean.size() ? names[far] : "value " + std::to_string(far);
    std::fprintf(stderr, "warning: target %s: mean %.4g, standard deviation %.4g, far from the scale of a model's "
                 "first outputs (near 0 and 1), which may never reach it; --standardize_targets trains on the "
                 "targets scaled, and predicts in their units\n", name.c_str(), static_cast<double>(scale.mean[far]),
                 static_cast<double>(scale.std[far]));
  }
  return {};
}

// --model's layers (with an Embedding first for token ids), then one output per class or per
// target value; the loss --loss, with the class or positive weights `weights` where there are
// any (--class_weights, --pos_weight); the metrics --metrics, by the names of `classes` where
// the labels are names (precision@fraud).
cohort::Model build(cohort::Graph& graph, const cohort::Shape& data, const cohort::Shape& input,
                    const cohort::TargetSpec& targets, const std::vector<float>& weights,
                    const std::shared_ptr<const TargetScale>& scale, const std::vector<std::string>& classes) {
  cohort::Model model(graph);
  // --input_shape of the data's size reads each example in that shape (flat rows as [steps,
  // features] for a sequence model); of another size, the model refuses the data.
  const bool reshaped = input != data && cohort::num_elements(input) == cohort::num_elements(data);
  cohort::Node x = model.input(reshaped ? data : input);
  if (reshaped) x = model.apply(cohort::reshape("input_shape", input), x);
  cohort::Node mask;  // the padding's, with --mask_zero
  if (FLAGS_mask_zero && (input.size() == 1 || input.size() == 2))
    mask = model.apply(cohort::padding_mask("mask"), x);
  if (FLAGS_vocabulary > 0) {
    x = model.apply(cohort::embedding("embedding", FLAGS_vocabulary, FLAGS_embedding_dim), x);
  } else if (FLAGS_model != "mlp" && input.size() == 1) {
    x = model.apply(cohort::reshape("steps", {input[0], 1}), x);  // a series of single values
  }
  if (FLAGS_model != "mlp") {
    if (model.shape(x).size() != 2)
      throw cohort::InvalidArgument(
          "--model=" + FLAGS_model + " reads sequences [steps, features] (or [steps] token ids "
          "with --vocabulary); the data's examples are " + cohort::to_string(input));
    x = cohort::sequence_encoder(model, x, FLAGS_model, FLAGS_units, mask);
  }
  // No hidden layer at all (--hidden=) makes a linear model.
  const std::vector<std::int64_t> hidden =
      FLAGS_model != "mlp" || FLAGS_hidden.empty()
          ? std::vector<std::int64_t>{}
          : cohort::flags::parse_size_list("hidden", FLAGS_hidden, 1 << 20);
  for (std::size_t i = 0; i < hidden.size(); ++i)
    x = model.apply(cohort::dense("hidden" + std::to_string(i + 1), hidden[i], cohort::Activation::kRelu), x);
  const std::int64_t outputs = targets.labels ? targets.num_classes : cohort::num_elements(targets.shape);
  model.apply(cohort::dense("output", outputs), x);
  // --standardize_targets: the loss of the scaled targets, the metrics of the outputs scaled back:
  // the loss's defaults, less those --metrics names again, then --metrics.
  if (!scale->mean.empty()) {
    std::unique_ptr<cohort::Loss> loss =
        FLAGS_loss == "huber" ? std::make_unique<cohort::HuberLoss>(static_cast<float>(FLAGS_huber_delta))
                              : cohort::make_loss(FLAGS_loss);
    const std::vector<std::string> asked = cohort::flags::split_list("metrics", FLAGS_metrics);
    std::vector<std::unique_ptr<cohort::Metric>> metrics;
    for (auto& metric : cohort::default_metrics(*loss))
      if (std::find(asked.begin(), asked.end(), metric->name()) == asked.end()) metrics.push_back(std::move(metric));
    for (const std::string& name : asked) metrics.push_back(cohort::make_metric(name, classes));
    model.set_loss(std::make_unique<ScaledTargetsLoss>(std::move(loss), scale));
    for (auto& metric : metrics) model.add_metric(std::make_unique<ScaledOutputsMetric>(std::move(metric), scale));
    return model;
  }
  if (FLAGS_loss == "huber")
    model.set_loss(std::make_unique<cohort::HuberLoss>(static_cast<float>(FLAGS_huber_delta)));
  else if (FLAGS_loss == "focal")
    model.set_loss(std::make_unique<cohort::FocalLoss>(static_cast<float>(FLAGS_focal_gamma),
                                                       static_cast<float>(FLAGS_focal_alpha)));
  else if (weights.empty())
    model.set_loss(cohort::make_loss(FLAGS_loss));
  else if (FLAGS_loss == "softmax_cross_entropy")
    model.set_loss(std::make_unique<cohort::SoftmaxCrossEntropyLoss>(0.0f, weights));
  else
    model.set_loss(std::make_unique<cohort::SigmoidCrossEntropyLoss>(weights));
  for (const std::string& name : cohort::flags::split_list("metrics", FLAGS_metrics))
    model.add_metric(cohort::make_metric(name, classes));
  return model;
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
  if (cohort::flags::Registry::global().given("huber_delta") && FLAGS_loss != "huber")
    throw cohort::InvalidArgument("--huber_delta: for --loss=huber, not --loss=" + FLAGS_loss);
  for (const char* flag : {"focal_gamma", "focal_alpha"})
    if (cohort::flags::Registry::global().given(flag) && FLAGS_loss != "focal")
      throw cohort::InvalidArgument("--" + std::string(flag) + ": for --loss=focal, not --loss=" + FLAGS_loss);
  if (server.is_chief()) {
    const bool csv = is_csv(FLAGS_train) || is_csv(FLAGS_test) || is_csv(FLAGS_predict);
    const auto keyed = [](const std::string& spec) {
      return ends_with(spec, ".npz") || ends_with(spec, ".h5") || ends_with(spec, ".hdf5");
    };
    const cohort::flags::Scope scoped[] = {
        {"hidden", FLAGS_model == "mlp", "by --model=mlp"},
        {"units", FLAGS_model != "mlp", "by a sequence --model"},
        {"embedding_dim", FLAGS_vocabulary > 0, "with --vocabulary"},
        {"horizon", FLAGS_window > 0, "with --window"},
        {"csv_header", csv, "for CSV files"},
        {"csv_delimiter", csv, "for CSV files"},
        {"features_key", keyed(FLAGS_train) || keyed(FLAGS_test) || keyed(FLAGS_predict), "for .npz and HDF5 files"},
        {"targets_key", keyed(FLAGS_train) || keyed(FLAGS_test), "for .npz and HDF5 files"},
        {"min_delta", FLAGS_patience > 0 || FLAGS_reduce_lr_patience > 0, "with --patience or --reduce_lr_patience"},
        {"reduce_lr_factor", FLAGS_reduce_lr_patience > 0, "with --reduce_lr_patience"},
    };
    for (const std::string& warning : cohort::flags::Registry::global().unread(scoped, "--train=" + FLAGS_train + ", --model=" + FLAGS_model))
      std::fprintf(stderr, "%s\n", warning.c_str());
  }
  // The chief writes its results at the end: paths that cannot be written end the job now.
  if (server.is_chief())
    cohort::check_outputs({{"--predictions", FLAGS_predictions}, {"--metrics_json", FLAGS_metrics_json}},
                          {{"--train", FLAGS_train}, {"--test", FLAGS_test}, {"--predict", FLAGS_predict}});
  if (!is_csv(FLAGS_train) && !(FLAGS_feature_columns.empty() && FLAGS_ignore_columns.empty()))
    throw cohort::InvalidArgument("--feature_columns and --ignore_columns: for CSV files; --train=" + FLAGS_train +
                                  " is not one");
  if (FLAGS_standardize && FLAGS_vocabulary > 0)
    throw cohort::InvalidArgument("--standardize with --vocabulary=" + std::to_string(FLAGS_vocabulary) +
                                  ": token ids must stay integers; standardise values, not ids");
  if (FLAGS_mask_zero && (FLAGS_model == "mlp" || FLAGS_model == "conv1d"))
    throw cohort::InvalidArgument("--mask_zero with --model=" + FLAGS_model +
                                  ": it reads every step; the mask is for lstm, gru, bilstm and transformer");
  if (FLAGS_mask_zero && FLAGS_standardize)
    throw cohort::InvalidArgument("--mask_zero with --standardize: the padding would no longer be 0");
  // Each worker reads its shard of the training data; the chief alone, which evaluates, the
  // test data (without --test: the whole training file). With --validation_split every worker
  // reads the whole file, splits it alike and keeps its shard of the training part.
  if (FLAGS_validation_split > 0 && !FLAGS_test.empty())
    throw cohort::InvalidArgument("--validation_split=" + std::to_string(FLAGS_validation_split) +
                                  " with --test=" + FLAGS_test + ": give one set to evaluate on");
  if (FLAGS_window > 0 && FLAGS_validation_split > 0)
    throw cohort::InvalidArgument("--validation_split with --window=" + std::to_string(FLAGS_window) +
                                  ": windows held out at random share rows with the training windows; "
                                  "give the series' later part as --test");
  const cohort::data::ShardSpec mine{server.replica_index(), server.num_replicas()};
  CsvTable table;
  cohort::data::Dataset train;
  std::optional<cohort::data::Dataset> test;
  // With --window, a file is one series: its windows are made from the whole of it (they
  // overlap shards' rows), and the workers' shards are of windows.
  const auto windowed = [](const cohort::data::Dataset& rows) {
    return FLAGS_window > 0 ? rows.windows(FLAGS_window, FLAGS_horizon) : rows;
  };
  if (FLAGS_validation_split > 0) {
    const cohort::data::Dataset whole = windowed(load("train", FLAGS_train, table));
    const auto seed = static_cast<std::uint64_t>(FLAGS_seed);
    train = whole.split_part(FLAGS_validation_split, seed, false, mine.index, mine.count);
    if (server.is_chief()) test = whole.split_part(FLAGS_validation_split, seed, true);
  } else {
    train = FLAGS_window > 0
                ? windowed(load("train", FLAGS_train, table)).shard(mine.index, mine.count)
                : load("train", FLAGS_train, table, mine);
    if (server.is_chief())
      test = windowed(FLAGS_test.empty() ? load("train", FLAGS_train, table)
                                         : load("test", FLAGS_test, table));
  }
  // A CSV column read as class labels makes a sigmoid output per class; its loss takes 0/1
  // targets, one per output, which --target_columns reads.
  if (is_csv(FLAGS_train) && train.has_labels() && (FLAGS_loss == "sigmoid_cross_entropy" || FLAGS_loss == "focal"))
    throw cohort::InvalidArgument("--loss=" + FLAGS_loss + " with --label_column=" + FLAGS_label_column +
                                  ": it takes 0/1 targets, one per output; give the column as --target_columns=" +
                                  FLAGS_label_column + " (class labels are for softmax_cross_entropy)");
  const std::int64_t examples = server.replicas().allreduce(train.size());
  const cohort::Shape input = FLAGS_input_shape.empty()
                                  ? train.example_shape()
                                  : cohort::flags::parse_size_list("input_shape", FLAGS_input_shape,
                                                                   1 << 20);
  const cohort::TargetSpec targets = train.target_spec();

  cohort::Graph graph{cohort::ReplicaDeviceSetter(cohort::replica_device_setter_options_from_flags(
      cluster.num_tasks("ps"), server.worker_device()))};
  cohort::TrainerOptions options;
  options.batch_size = FLAGS_batch_size;
  options.moving_average_decay = FLAGS_moving_average_decay;
  // The whole training set's statistics, from every worker's shard: to standardise by, and to
  // tell a test file prepared otherwise (not a series' later part: a trend may take it anywhere).
  const bool compare_test = !FLAGS_test.empty() && FLAGS_window == 0;
  if (FLAGS_standardize || compare_test) {
    cohort::data::FeatureSums sums = cohort::data::feature_sums(train);
    cohort::ReplicaSum workers(server.replicas());
    sums.add_over(workers);
    if (FLAGS_standardize) sums.moments(options.image.mean, options.image.std);
    if (test && compare_test)
      if (const std::string fault = cohort::data::scale_mismatch(sums, *test); !fault.empty())
        std::fprintf(stderr, "warning: --test=%s: %s\n", FLAGS_test.c_str(), fault.c_str());
  }
  // A checkpoint's, where it kept them: what its parameters were trained with.
  if (FLAGS_standardize)
    restore_moments(server, FLAGS_checkpoint_dir, FLAGS_train, "feature", "standardize", options.image.mean,
                    options.image.std);
  const auto scale = std::make_shared<TargetScale>(target_scale(server, train, targets));
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
    std::printf("tabular: %lld global steps, %s, learning rate %g (%s)\n", static_cast<long long>(train_steps),
                cohort::describe(optimizer).c_str(), FLAGS_learning_rate, FLAGS_lr_schedule.c_str());
  // Class names are numbered in sorted order: which number is which, for the metrics of a class
  // (precision of class 1) and the weights per class.
  if (server.is_chief() && !table.classes.empty()) {
    std::string mapping;
    for (std::size_t c = 0; c < table.classes.size(); ++c)
      mapping += (c == 0 ? "" : ", ") + std::to_string(c) + " " + table.classes[c];
    std::printf("classes: %s\n", mapping.c_str());
  }
  // --class_weights or --pos_weight: as given, or balanced over every worker's labels or targets.
  std::vector<float> weights;
  if (!FLAGS_class_weights.empty() || !FLAGS_pos_weight.empty()) {
    const bool classes = !FLAGS_class_weights.empty();
    const std::string flag = classes ? "--class_weights" : "--pos_weight";
    const std::string loss = classes ? "softmax_cross_entropy" : "sigmoid_cross_entropy";
    if (classes && !FLAGS_pos_weight.empty())
      throw cohort::InvalidArgument("--class_weights and --pos_weight weigh different losses: give one");
    if (FLAGS_loss != loss)
      throw cohort::InvalidArgument(flag + " weighs " + loss + ", not --loss=" + FLAGS_loss);
    cohort::ReplicaSum workers(server.replicas());
    weights = classes ? cohort::data::class_weights(FLAGS_class_weights, train, &workers, flag)
                      : cohort::data::positive_weights(FLAGS_pos_weight, train, &workers, flag);
    if (server.is_chief())
      std::printf("%s\n", cohort::data::describe_class_weights(
                               weights, classes ? "class weights" : "positive weights").c_str());
  }
  const auto model = [&](cohort::Graph& g) { return build(g, train.example_shape(), input, targets, weights, scale, table.classes); };
  cohort::Trainer trainer(&server, graph, model, train, cohort::Optimizer::create(optimizer), options);
  // Found now, not after the whole run.
  if (test) cohort::check_dataset(trainer.model(), *test, /*whole=*/true);
  // Examples, or with --window a series: rows of the shape of the model's steps.
  if (server.is_chief() && !FLAGS_predict.empty()) check_predict_file(table.features, trainer.model().example_shape());

  const bool judges = FLAGS_patience > 0 || FLAGS_reduce_lr_patience > 0 || !FLAGS_best_dir.empty();
  if (judges && FLAGS_eval_every_steps == 0)
    throw cohort::InvalidArgument("--patience, --reduce_lr_patience and --best_dir judge the evaluations of "
                                  "--eval_every_steps, which is 0");
  if (FLAGS_restore_best && FLAGS_best_dir.empty())
    throw cohort::InvalidArgument("--restore_best: needs --best_dir, where the best parameters are kept");
  cohort::HookList chief_only;
  // On the chief, which holds the test data; the final evaluation is the program's own, below.
  std::shared_ptr<cohort::ValidationHook> validation;
  if (FLAGS_eval_every_steps > 0 && test) {
    validation = std::make_shared<cohort::ValidationHook>(cohort::ValidationHookOptions{
        .data = *test, .every_steps = FLAGS_eval_every_steps, .at_end = false, .min_delta = FLAGS_min_delta,
        .patience = FLAGS_patience,
        .reduce_lr_factor = FLAGS_reduce_lr_patience > 0 ? FLAGS_reduce_lr_factor : 0.0,
        .reduce_lr_patience = FLAGS_reduce_lr_patience, .best_dir = FLAGS_best_dir});
    chief_only.push_back(validation);
  }
  auto session = cohort::MonitoredTrainingSession(trainer, {
      .master = server.target(),
      .is_chief = server.is_chief(),
      .checkpoint_dir = FLAGS_checkpoint_dir,
      // Epochs count examples, so that a job resumed with other workers trains the rest of them.
      .hooks = {FLAGS_epochs > 0 ? cohort::StopAtStepHook::after_examples(FLAGS_epochs * examples)
                                  : cohort::StopAtStepHook::last(train_steps),
                std::make_shared<cohort::NanTensorHook>()},
      .chief_only_hooks = chief_only,
      .settings = settings(table, options.image, *scale)});
  while (!session->should_stop()) session->run();
  const std::int64_t session_start = session->restored_step().value_or(0) + 1;
  session->close();  // the graph now holds the final parameters
  if (server.is_chief()) {
    bool best_loaded = false;
    if (FLAGS_restore_best) {
      // The best evaluation's checkpoint, of this job or of the job it resumes (none when no
      // evaluation gave a loss: every one NaN).
      const std::string best = validation ? validation->best_checkpoint() : std::string();
      if (!best.empty()) {
        const cohort::Checkpoint checkpoint = cohort::read_checkpoint(best);
        trainer.load_parameters(checkpoint);
        best_loaded = true;
        std::printf("tabular: the best evaluation's parameters, of global step %lld (--restore_best)\n",
                    static_cast<long long>(checkpoint.global_step()));
      } else {
        std::printf("tabular: no best evaluation in this job: the last step's parameters (--restore_best)\n");
      }
    }
    const cohort::StepMetrics m = trainer.evaluate(*test);
    const auto& names = trainer.model().metric_names();
    // The set evaluated on: --test, --validation_split's part of --train, or all of --train.
    const char* set = !FLAGS_test.empty() ? "test" : FLAGS_validation_split > 0 ? "validation" : "training-set";
    std::printf("tabular: %d worker%s, %lld examples, global step %lld, %s loss %.5f",
                server.num_replicas(), server.num_replicas() == 1 ? "" : "s",
                static_cast<long long>(examples), static_cast<long long>(trainer.read_global_step()), set,
                m.loss);
    std::vector<cohort::JsonField> json{{"loss", m.loss}};
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::printf(", %s %.5f", names[i].c_str(), m.metrics[i]);
      json.emplace_back(names[i], m.metrics[i]);
    }
    std::printf("\n");
    // The final evaluation joins the eval run beside the training summaries (the
    // ValidationHook's), as train's does; not the best evaluation's parameters, already there.
    if (!FLAGS_checkpoint_dir.empty() && !best_loaded)
      cohort::write_final_evaluation(FLAGS_checkpoint_dir + "/eval", trainer.read_global_step(), names, m,
                                     cohort::last_evaluated_step(validation.get()), session_start);
    if (!FLAGS_metrics_json.empty()) cohort::write_json_object(FLAGS_metrics_json, json);
    if (!FLAGS_predict.empty()) {
      const std::vector<std::string> target_names =
          cohort::flags::split_list("target_columns", FLAGS_target_columns);
      if (FLAGS_predictions.empty()) {
        predict(trainer, table.features, targets, target_names, table.classes, *scale, std::cout);
      } else {
        std::ofstream out(FLAGS_predictions);
        const std::int64_t count = predict(trainer, table.features, targets, target_names, table.classes, *scale, out);
        if (!out.flush()) throw cohort::Error("cannot write --predictions=" + FLAGS_predictions);
        std::printf("tabular: %lld predictions written to %s\n", static_cast<long long>(count),
                    FLAGS_predictions.c_str());
      }
    }
  }
  server.done();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
