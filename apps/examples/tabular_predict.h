#pragma once
// example_tabular's files read as they are named (apps/examples/tabular.cc): which reader a
// --train, --test or --predict value asks for, and --predict's predictions, read and written
// kPredictRows at a time.
#include <cohort/cohort.h>

#include "tabular_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

// tabular.cc's flags that these read.
COHORT_DECLARE_string(train);
COHORT_DECLARE_string(predict);
COHORT_DECLARE_string(features_key);
COHORT_DECLARE_string(loss);
COHORT_DECLARE_string(csv_delimiter);
COHORT_DECLARE_bool(csv_header);
COHORT_DECLARE_int(window);
COHORT_DECLARE_int(horizon);

namespace tabular {

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A --train, --test or --predict value naming a CSV file.
inline bool is_csv(const std::string& spec) { return ends_with(spec, ".csv") || ends_with(spec, ".csv.gz"); }

// How --csv_delimiter and --csv_header say to read a CSV file, with `feature_columns`.
inline cohort::data::CsvOptions csv_options(const std::vector<std::string>& feature_columns) {
  if (FLAGS_csv_delimiter.size() != 1)
    throw cohort::InvalidArgument("--csv_delimiter=" + FLAGS_csv_delimiter + ": expected one character");
  cohort::data::CsvOptions csv;
  csv.delimiter = FLAGS_csv_delimiter[0];
  csv.header = FLAGS_csv_header;
  csv.feature_columns = feature_columns;
  return csv;
}


inline constexpr std::int64_t kPredictRows = 4096;  // rows of --predict read and predicted at a time

// Rows `begin` to `begin + count` of `rows`.
inline cohort::Tensor slice_rows(const cohort::Tensor& rows, std::int64_t begin, std::int64_t count) {
  const std::int64_t row = rows.dim(0) > 0 ? rows.size() / rows.dim(0) : 0;
  cohort::Shape shape = rows.shape();
  shape[0] = count;
  return cohort::Tensor(shape, rows.span().subspan(static_cast<std::size_t>(begin * row),
                                                   static_cast<std::size_t>(count * row)));
}

// `a`'s rows, then `b`'s (of the same shape).
inline cohort::Tensor join_rows(const cohort::Tensor& a, const cohort::Tensor& b) {
  cohort::Shape shape = b.shape();
  shape[0] += a.dim(0);
  cohort::Tensor out(shape);
  std::copy_n(a.data(), a.size(), out.data());
  std::copy_n(b.data(), b.size(), out.data() + a.size());
  return out;
}

// Calls `take` with --predict's rows in order, kPredictRows at a time: a CSV file's columns
// `csv_features` (the training file's) and an HDF5 file's dataset --features_key are read as they
// are taken, so that a file of any size is never held whole; the features array of a .npy or
// .npz file is read whole first. Rows are [k, example...].
inline void for_each_predict_batch(const std::string& spec, const std::vector<std::string>& csv_features,
                            const std::function<void(const cohort::Tensor&)>& take) {
  if (is_csv(spec)) {
    if (csv_features.empty())
      throw cohort::InvalidArgument("--predict=" + spec + ": a CSV file of the training file's feature columns, "
                                    "and --train=" + FLAGS_train + " is not a CSV file");
    return cohort::data::for_each_csv_features_batch(spec, csv_options(csv_features), kPredictRows, take);
  }
  if (ends_with(spec, ".h5") || ends_with(spec, ".hdf5"))
    return cohort::data::for_each_hdf5_batch(
        spec, FLAGS_features_key, kPredictRows,
        [&](const cohort::data::NpyArray& rows, const cohort::Shape&) { take(rows.values); });
  cohort::Tensor all;
  if (ends_with(spec, ".npy")) {
    all = cohort::data::load_npy(spec).values;
  } else if (ends_with(spec, ".npz")) {
    std::map<std::string, cohort::data::NpyArray> arrays = cohort::data::load_npz(spec);
    const auto it = arrays.find(FLAGS_features_key);
    if (it == arrays.end())
      throw cohort::InvalidArgument("--predict=" + spec + ": no array '" + FLAGS_features_key +
                                    "' (--features_key) in it");
    all = std::move(it->second.values);
  } else {
    throw cohort::InvalidArgument("--predict=" + spec + ": expected FILE.csv, FEATURES.npy, FILE.npz or FILE.h5");
  }
  if (all.dim(0) == 0) take(all);
  for (std::int64_t begin = 0; begin < all.dim(0); begin += kPredictRows)
    take(slice_rows(all, begin, std::min(kPredictRows, all.dim(0) - begin)));
}

// Reads --predict through before training, so that a fault of any row ends the job now, not
// after the run: its rows must be examples of the model's input (`model_takes`), or with
// --window rows of its steps, at least --window of them.
inline void check_predict_file(const std::vector<std::string>& csv_features, const cohort::Shape& model_takes) {
  const cohort::Shape takes = FLAGS_window > 0 ? cohort::Shape(model_takes.begin() + 1, model_takes.end()) : model_takes;
  std::int64_t rows = 0;
  for_each_predict_batch(FLAGS_predict, csv_features, [&](const cohort::Tensor& batch) {
    const cohort::Shape& shape = batch.shape();
    if (shape.size() != takes.size() + 1 || !std::equal(takes.begin(), takes.end(), shape.begin() + 1))
      throw cohort::InvalidArgument("--predict=" + FLAGS_predict + (FLAGS_window > 0 ? ": rows" : ": examples") +
                                    " of shape " + cohort::to_string(cohort::Shape(shape.begin() + 1, shape.end())) +
                                    ", not the model's " + (FLAGS_window > 0 ? "steps " : "input ") +
                                    cohort::to_string(takes));
    const std::int64_t per_row = shape[0] > 0 ? batch.size() / shape[0] : 0;
    for (std::int64_t i = 0; i < batch.size(); ++i)
      if (!std::isfinite(batch[i]))  // a CSV file's are refused as read; an array's here
        throw cohort::InvalidArgument("--predict=" + FLAGS_predict + ": " + (FLAGS_window > 0 ? "row " : "example ") +
                                      std::to_string(rows + i / per_row) + " holds " + std::to_string(batch[i]) +
                                      ", not a finite number");
    rows += shape[0];
  });
  if (rows == 0) throw cohort::InvalidArgument("--predict=" + FLAGS_predict + ": no examples in it");
  if (rows < FLAGS_window)
    throw cohort::InvalidArgument("--predict=" + FLAGS_predict + ": " + std::to_string(rows) +
                                  " rows, fewer than --window=" + std::to_string(FLAGS_window));
}

// --predict's examples `begin` to `begin + count`: rows of `rows`, or with --window the
// windows of the series `rows` (window i: rows i to i + window - 1), [count, window, row...].
inline cohort::Tensor examples(const cohort::Tensor& rows, std::int64_t begin, std::int64_t count) {
  const std::int64_t row = rows.size() / rows.dim(0);
  const std::int64_t span = FLAGS_window > 0 ? FLAGS_window : 1;  // rows per example
  cohort::Shape shape = rows.shape();
  shape[0] = count;
  if (FLAGS_window > 0) shape.insert(shape.begin() + 1, FLAGS_window);
  cohort::Tensor out(shape);
  for (std::int64_t i = 0; i < count; ++i)
    std::copy_n(rows.data() + (begin + i) * row, span * row, out.data() + i * span * row);
  return out;
}

// Writes the trained model's prediction for each example of --predict (Trainer::predict:
// standardised as the training data were, with the moving averages where kept), a CSV row each
// after its index: the class (by name where `classes` names them), its probability and every
// class's (columns p_<class>, for a threshold or a curve of one's own) for class labels, each
// target's probability for sigmoid cross-entropy and the focal loss, else each target's value
// (columns named by `target_names`, or y0, y1, ...). With --window, every window of the series
// of rows is an example, down to the one ending at its last row, and `target_row` says which row
// of the series it forecasts (past its end for the last --horizon windows).
// Reads the file kPredictRows at a time (for_each_predict_batch). Returns the examples.
inline std::int64_t predict(cohort::Trainer& trainer, const std::vector<std::string>& csv_features,
                     const cohort::TargetSpec& targets, const std::vector<std::string>& target_names,
                     const std::vector<std::string>& classes, const TargetScale& scale, std::ostream& out) {
  const bool probabilities = targets.labels || FLAGS_loss == "sigmoid_cross_entropy" || FLAGS_loss == "focal";
  const std::int64_t span = FLAGS_window > 0 ? FLAGS_window : 1;  // rows per example
  cohort::Tensor carry;  // the last span - 1 rows read: the first rows of windows still to come
  std::int64_t begin = 0;  // the index of the next example
  for_each_predict_batch(FLAGS_predict, csv_features, [&](const cohort::Tensor& batch) {
    const cohort::Tensor rows = carry.rank() > 0 ? join_rows(carry, batch) : batch;
    if (span > 1) carry = slice_rows(rows, std::max<std::int64_t>(0, rows.dim(0) - (span - 1)),
                                     std::min(span - 1, rows.dim(0)));
    const std::int64_t count = rows.dim(0) - span + 1;
    if (count <= 0) return;
    cohort::Tensor values =
        probabilities ? trainer.predict_probabilities(examples(rows, 0, count)) : trainer.predict(examples(rows, 0, count));
    if (!scale.mean.empty()) values = scale.convert(values, true);  // in the targets' units
    const std::int64_t k = values.size() / values.dim(0);
    if (begin == 0) {
      out << "index" << (FLAGS_window > 0 ? ",target_row" : "");
      if (targets.labels) {  // the class, its probability, then every class's (predict_proba's)
        out << ",class,probability";
        for (std::int64_t j = 0; j < k; ++j)
          out << "," << cohort::data::csv_field(
                             "p_" + (classes.empty() ? std::to_string(j) : classes[static_cast<std::size_t>(j)]));
      }
      for (std::int64_t j = 0; j < k && !targets.labels; ++j)
        out << "," << (static_cast<std::size_t>(k) == target_names.size() ? target_names[static_cast<std::size_t>(j)]
                                                                          : "y" + std::to_string(j));
      out << "\n";
    }
    for (std::int64_t i = 0; i < values.dim(0); ++i) {
      const float* row = values.data() + i * k;
      out << begin + i;
      if (FLAGS_window > 0) out << "," << begin + i + FLAGS_window - 1 + FLAGS_horizon;
      if (targets.labels) {
        const std::int64_t best = std::max_element(row, row + k) - row;
        out << "," << (classes.empty() ? std::to_string(best) : cohort::data::csv_field(classes[static_cast<std::size_t>(best)]))
            << "," << exact_text(row[best]);
        for (std::int64_t j = 0; j < k; ++j) out << "," << exact_text(row[j]);
      } else {
        for (std::int64_t j = 0; j < k; ++j) out << "," << exact_text(row[j]);
      }
      out << "\n";
    }
    begin += count;
  });
  return begin;
}

}  // namespace tabular
