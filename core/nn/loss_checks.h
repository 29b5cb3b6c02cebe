#pragma once
// What the losses and metrics share (internal to core/nn: loss.cc and categorical_loss.cc): the
// checks of predictions against targets, each fault an InvalidArgument naming the loss or metric
// (`what`: "loss <name>", "metric <name>") and both sides, and the softmax.

#include <cstdint>
#include <string>

#include "cohort/core/nn/loss.h"

namespace cohort::loss_detail {

/// "predictions [10]": one example's prediction shape, for messages.
std::string per_example(const Shape& prediction);

/// Throws "<what> does not fit the data: predictions P per example, T; <why>".
[[noreturn]] void mismatch(const std::string& what, const Shape& prediction, const TargetSpec& targets,
                           const std::string& why);

/// Whether a row of logits predicts a class at all: not where a logit is not finite (a diverged
/// model), as TensorFlow's in_top_k has it, for every metric alike.
bool predicts_a_class(const float* logits, std::int64_t classes);

/// The classes of a prediction [classes] (a vector of logits), or 0 when it is not one.
std::int64_t classes_of(const Shape& prediction);

/// That `targets` are class labels for a vector of logits of as many classes or more.
void check_labels(const std::string& what, const Shape& prediction, const TargetSpec& targets);

/// That `targets` are float targets of the prediction's number of elements.
void check_values(const std::string& what, const Shape& prediction, const TargetSpec& targets);

/// The batch's float targets, checked to be as many as the predictions, in as many examples.
const Tensor& values_of(const std::string& what, const Tensor& predictions, const Targets& targets);

/// The softmax of n logits into y, shifted by their largest (every exponent <= 0).
void softmax(const float* x, std::int64_t n, float* y);

/// The softmax of every row of `classes` logits of `output` (zeros for no classes).
Tensor row_softmax(const Tensor& output, std::int64_t classes);

}  // namespace cohort::loss_detail
