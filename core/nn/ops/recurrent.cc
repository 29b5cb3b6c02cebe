#include "cohort/core/nn/ops/recurrent.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/initializer.h"
#include "cohort/core/nn/ops/bias_grad.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/ops/ops.h"
#include "cohort/core/nn/ops/parallel.h"
#include "cohort/core/nn/threads.h"

namespace cohort {
namespace {

using ops_detail::bias_grad;
using ops_detail::broadcast_rows;
using ops_detail::gemm;
using ops_detail::in_ranges;

using RowArray = Eigen::Map<Eigen::ArrayXf>;
using ConstRowArray = Eigen::Map<const Eigen::ArrayXf>;

// Calls fn(start, count, read) for the runs of rows [0, rows) (examples from `first`) that the
// mask reads alike at step t: one run of them all, read, without a mask.
template <typename Fn>
void for_runs(const Tensor* mask, std::int64_t t, std::int64_t first, std::int64_t rows, Fn&& fn) {
  for (std::int64_t b = 0; b < rows;) {
    const bool read = mask_reads(mask, first + b, t);
    std::int64_t end = b + 1;
    while (end < rows && mask_reads(mask, first + end, t) == read) ++end;
    fn(b, end - b, read);
    b = end;
  }
}

// data [batch, steps, features] rows b0 to b0 + rows: each step of example b times mask[b]
// [features] (the input dropout's mask, the same at every step).
void times_mask_at_every_step(float* data, const float* mask, std::int64_t b0, std::int64_t rows,
                              std::int64_t steps, std::int64_t features) {
  for (std::int64_t b = b0; b < b0 + rows; ++b) {
    const ConstRowArray keep(mask + b * features, features);
    for (std::int64_t t = 0; t < steps; ++t)
      RowArray(data + (b * steps + t) * features, features) *= keep;
  }
}

}  // namespace

Recurrent::Recurrent(const char* kind, std::string name, std::int64_t units, int gates,
                     const RecurrentOptions& options, bool recurrent_bias)
    : kind_(kind),
      name_(std::move(name)),
      units_(units),
      gates_(gates),
      return_sequences_(options.return_sequences),
      initial_state_(options.initial_state),
      return_state_(options.return_state),
      recurrent_bias_(recurrent_bias),
      dropout_(options.dropout),
      recurrent_dropout_(options.recurrent_dropout),
      dropout_key_(name_ + "/dropout"),
      recurrent_dropout_key_(name_ + "/recurrent_dropout") {
  const std::string what = std::string(kind_) + " \"" + name_ + "\": ";
  if (units_ < 1)
    throw InvalidArgument(what + "units = " + std::to_string(units_) + ", must be >= 1");
  for (const auto& [rate, label] : {std::pair{dropout_, "dropout"},
                                    std::pair{recurrent_dropout_, "recurrent_dropout"}})
    if (!(rate >= 0.0f && rate < 1.0f))
      throw InvalidArgument(what + label + " = " + std::to_string(rate) + ", must be in [0, 1)");
  if (return_state_ && return_sequences_)
    throw InvalidArgument(what + "return_state and return_sequences: a layer gives one output "
                                 "(a second layer over the same input gives the other)");
}

Shape Recurrent::build(Graph& graph, const Shape& input) {
  if (input.size() != 2 || input[0] < 1 || input[1] < 1)
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": input " + to_string(input) +
                          " is not [steps, features] (a Reshape makes a sequence of an example)");
  steps_ = input[0];
  features_ = input[1];
  graph_ = &graph;
  const std::int64_t columns = gates_ * units_;
  kernel_offset_ = graph.get_variable(name_ + "/kernel", {features_, columns},
                                      Initializer::glorot_uniform(), VariableOptions{.decay = true})
                       .offset;
  recurrent_offset_ =
      graph.get_variable(name_ + "/recurrent_kernel", {units_, columns},
                         Initializer::orthogonal(), VariableOptions{.decay = true})
          .offset;
  const Shape bias = recurrent_bias_ ? Shape{2, columns} : Shape{columns};
  bias_offset_ = graph.get_variable(name_ + "/bias", bias, Initializer::zeros()).offset;
  if (return_state_) return {state_size()};
  if (return_sequences_) return {steps_, units_};
  return {units_};
}

Shape Recurrent::build_inputs(Graph& graph, std::span<const Shape> inputs) {
  if (initial_state_ && inputs[1] != Shape{state_size()})
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": initial state " +
                          to_string(inputs[1]) + " is not [" + std::to_string(state_size()) + "]" +
                          (cell_state_size() > 0 ? " (h and c side by side)" : " (h)"));
  return build(graph, inputs[0]);
}

void Recurrent::forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                               const OpContext& context) {
  const ops_detail::ForCall<const Tensor> call(initial_,
                                               inputs.size() > 1 ? inputs[1] : nullptr);
  forward(*inputs[0], output, context);
}

void Recurrent::backward_inputs(std::span<const Tensor* const> inputs, const Tensor& output,
                                const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                                std::span<float> grads) {
  const ops_detail::ForCall<Tensor> call(grad_initial_,
                                         grad_inputs.size() > 1 ? grad_inputs[1] : nullptr);
  backward(*inputs[0], output, grad_output, grad_inputs[0], grads);
}

// The examples of a batch recur independently: the intra-op threads each take a slice of them
// through every step (one parallel region, no barrier per step). Within step t, a slice's rows
// of the time-major buffers are contiguous. The kernels' gradients, sums over every example,
// are then split by the kernels' rows instead.
void Recurrent::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  if (initial_state_ && initial_ == nullptr)
    throw InvalidArgument(std::string(kind_) + " \"" + name_ + "\": built to start from a given "
                          "state (initial_state): apply it to {sequence, state}");
  const std::int64_t n = input.dim(0), t_count = steps_, u = units_, columns = gates_ * u;
  const float* values = graph_->values().data();
  const float* kernel = values + kernel_offset_;
  const float* recurrent = values + recurrent_offset_;
  const float* bias = values + bias_offset_;
  // The dropout: the input times a mask of [batch, features] at every step; the last output
  // times one of [batch, units] where it enters the recurrent product.
  inputs_dropped_ = context.training && dropout_ > 0.0f;
  states_dropped_ = context.training && recurrent_dropout_ > 0.0f;
  const float* in = input.data();
  if (inputs_dropped_) {
    input_mask_.resize({n, features_});
    dropout_mask(Graph::variable_seed(context.seed, dropout_key_), dropout_, input_mask_.span());
    dropped_input_ = input;
    in_ranges(n, [&](std::int64_t b0, std::int64_t rows) {
      times_mask_at_every_step(dropped_input_.data(), input_mask_.data(), b0, rows, t_count,
                               features_);
    });
    in = dropped_input_.data();
  }
  if (states_dropped_) {
    state_mask_.resize({n, u});
    dropout_mask(Graph::variable_seed(context.seed, recurrent_dropout_key_), recurrent_dropout_,
                 state_mask_.span());
    dropped_states_.resize({t_count, n, u});
  }
  xs_.resize({t_count, n, columns});
  rs_.resize({t_count, n, columns});
  hs_.resize({t_count, n, u});
  // The output before the first step: the given state's h, or zeros.
  from_state_ = initial_ != nullptr;
  const std::int64_t state = state_size();
  h0_.resize({n, u});
  if (from_state_) {
    for (std::int64_t b = 0; b < n; ++b) std::copy_n(initial_->data() + b * state, u, h0_.data() + b * u);
  } else {
    h0_.set_zero();
  }
  output.resize(return_state_ ? Shape{n, state} : return_sequences_ ? Shape{n, t_count, u} : Shape{n, u});
  begin(t_count, n, false, from_state_ ? initial_->data() : nullptr);
  in_ranges(n, [&](std::int64_t b0, std::int64_t rows) {
    for (std::int64_t t = 0; t < t_count; ++t) {
      // The step's input times the kernel, onto the broadcast bias.
      float* x = xs_.data() + (t * n + b0) * columns;
      broadcast_rows(bias, rows, columns, x);
      gemm(false, false, rows, columns, features_, 1.0f, in + (b0 * t_count + t) * features_,
           t_count * features_, kernel, columns, 1.0f, x, columns);
    }
    for (std::int64_t t = 0; t < t_count; ++t) {
      float* r = rs_.data() + (t * n + b0) * columns;
      const float* h_prev = t == 0 ? h0_.data() + b0 * u : hs_.data() + ((t - 1) * n + b0) * u;
      if (recurrent_bias_) {
        broadcast_rows(bias + columns, rows, columns, r);
      } else {
        std::fill_n(r, rows * columns, 0.0f);
      }
      if (t > 0 || from_state_) {  // (zeros before the first step contribute nothing)
        const float* product = h_prev;  // what enters the recurrent product
        if (states_dropped_) {
          float* dropped = dropped_states_.data() + (t * n + b0) * u;
          RowArray(dropped, rows * u) =
              ConstRowArray(h_prev, rows * u) * ConstRowArray(state_mask_.data() + b0 * u, rows * u);
          product = dropped;
        }
        gemm(false, false, rows, columns, u, 1.0f, product, u, recurrent, columns, 1.0f, r,
             columns);
      }
      float* x = xs_.data() + (t * n + b0) * columns;
      float* h = hs_.data() + (t * n + b0) * u;
      for_runs(mask(), t, b0, rows, [&](std::int64_t s, std::int64_t count, bool read) {
        if (read) {
          step_forward(t, b0 + s, count, x + s * columns, r + s * columns, h_prev + s * u,
                       h + s * u);
        } else {  // padding: the state stays
          std::copy_n(h_prev + s * u, count * u, h + s * u);
          carry(t, b0 + s, count);
        }
      });
    }
    if (return_state_) final_cell_state(b0, rows, output.data());
    for (std::int64_t b = b0; b < b0 + rows; ++b) {
      if (!return_sequences_) {  // the last output, alone or as the state's first part
        std::copy_n(hs_.data() + ((t_count - 1) * n + b) * u, u,
                    output.data() + b * (return_state_ ? state : u));
        continue;
      }
      for (std::int64_t t = 0; t < t_count; ++t) {
        float* y = output.data() + (b * t_count + t) * u;
        if (mask_reads(mask(), b, t)) {
          std::copy_n(hs_.data() + (t * n + b) * u, u, y);
        } else {
          std::fill_n(y, u, 0.0f);
        }
      }
    }
  }, 1);
}

void Recurrent::backward(const Tensor& input, const Tensor&, const Tensor& grad_output,
                         Tensor* grad_input, std::span<float> grads) {
  const std::int64_t n = input.dim(0), t_count = steps_, u = units_, columns = gates_ * u;
  const float* kernel = graph_->values().data() + kernel_offset_;
  const float* recurrent = graph_->values().data() + recurrent_offset_;
  float* grad_kernel = grads.data() + kernel_offset_;
  float* grad_recurrent = grads.data() + recurrent_offset_;
  float* grad_bias = grads.data() + bias_offset_;
  dxs_.resize({t_count, n, columns});
  drs_.resize({t_count, n, columns});
  dh_.resize({n, u});
  dh_prev_.resize({n, u});
  if (states_dropped_) grad_state_.resize({n, u});
  if (grad_input != nullptr) grad_input->resize(input.shape());
  const std::int64_t state = state_size();
  // With a given initial state, step 0's last output is a variable: its gradient is taken too.
  const bool to_state = from_state_;
  if (to_state && grad_initial_ != nullptr) grad_initial_->resize({n, state});
  begin(t_count, n, true, return_state_ ? grad_output.data() : nullptr);
  in_ranges(n, [&](std::int64_t b0, std::int64_t rows) {
    // The slice's dLoss/dh of the step being taken back, and of the step before it.
    float* dh = dh_.data() + b0 * u;
    float* dh_prev = dh_prev_.data() + b0 * u;
    std::fill_n(dh_prev, rows * u, 0.0f);  // from after the last step: nothing
    for (std::int64_t t = t_count - 1; t >= 0; --t) {
      // dh := what later steps sent back, plus the loss's own gradient where step t is an output.
      std::swap(dh, dh_prev);
      if (return_sequences_ || t == t_count - 1) {
        for (std::int64_t b = 0; b < rows; ++b) {
          const std::int64_t example = b0 + b;
          if (return_sequences_ && !mask_reads(mask(), example, t)) continue;  // a constant 0 there
          const float* g =
              grad_output.data() + (return_sequences_ ? (example * t_count + t) * u
                                                      : example * (return_state_ ? state : u));
          for (std::int64_t j = 0; j < u; ++j) dh[b * u + j] += g[j];
        }
      }
      const float* h_prev = t == 0 ? h0_.data() + b0 * u : hs_.data() + ((t - 1) * n + b0) * u;
      const bool before = t > 0 || to_state;  // whether the output before step t is a variable
      if (before) std::fill_n(dh_prev, rows * u, 0.0f);
      const float* x = xs_.data() + (t * n + b0) * columns;
      const float* r = rs_.data() + (t * n + b0) * columns;
      float* dx = dxs_.data() + (t * n + b0) * columns;
      float* dr = drs_.data() + (t * n + b0) * columns;
      for_runs(mask(), t, b0, rows, [&](std::int64_t s, std::int64_t count, bool read) {
        if (read) {
          step_backward(t, b0 + s, count, dh + s * u, x + s * columns, r + s * columns,
                        h_prev + s * u, dx + s * columns, dr + s * columns,
                        before ? dh_prev + s * u : nullptr);
          return;
        }
        // Padding: the gradient passes to the step before unchanged; the kernels get none.
        std::fill_n(dx + s * columns, count * columns, 0.0f);
        std::fill_n(dr + s * columns, count * columns, 0.0f);
        if (before) std::copy_n(dh + s * u, count * u, dh_prev + s * u);
      });
      if (before && !states_dropped_) {
        gemm(false, true, rows, u, columns, 1.0f, dr, columns, recurrent, columns, 1.0f, dh_prev,
             u);
      } else if (before) {  // through the recurrent dropout's mask
        float* grad_state = grad_state_.data() + b0 * u;
        gemm(false, true, rows, u, columns, 1.0f, dr, columns, recurrent, columns, 0.0f,
             grad_state, u);
        RowArray(dh_prev, rows * u) += ConstRowArray(grad_state, rows * u) *
                                       ConstRowArray(state_mask_.data() + b0 * u, rows * u);
      }
    }
    if (to_state && grad_initial_ != nullptr) {  // dh_prev now holds dLoss/d(the initial h)
      for (std::int64_t b = 0; b < rows; ++b)
        std::copy_n(dh_prev + b * u, u, grad_initial_->data() + (b0 + b) * state);
      initial_cell_state_grad(b0, rows, grad_initial_->data());
    }
    if (grad_input != nullptr) {
      for (std::int64_t t = 0; t < t_count; ++t)
        gemm(false, true, rows, features_, columns, 1.0f, dxs_.data() + (t * n + b0) * columns,
             columns, kernel, columns, 0.0f, grad_input->data() + (b0 * t_count + t) * features_,
             t_count * features_);
      if (inputs_dropped_)  // through the dropout's mask
        times_mask_at_every_step(grad_input->data(), input_mask_.data(), b0, rows, t_count,
                                 features_);
    }
  }, 1);
  // kernel gradient = sum over steps of x_t^T dx_t; recurrent = sum over steps of h_{t-1}^T dr_t
  // (x and h as they entered the products: after the dropout).
  const float* in = inputs_dropped_ ? dropped_input_.data() : input.data();
  in_ranges(features_, [&](std::int64_t f0, std::int64_t count) {
    for (std::int64_t t = 0; t < t_count; ++t)
      gemm(true, false, count, columns, n, 1.0f, in + t * features_ + f0, t_count * features_,
           dxs_.data() + t * n * columns, columns, t == 0 ? 0.0f : 1.0f,
           grad_kernel + f0 * columns, columns);
  }, 1);
  std::fill_n(grad_recurrent, u * columns, 0.0f);
  const float* states = states_dropped_ ? dropped_states_.data() : nullptr;
  in_ranges(u, [&](std::int64_t u0, std::int64_t count) {
    for (std::int64_t t = to_state ? 0 : 1; t < t_count; ++t) {
      const float* h_prev = t == 0 ? h0_.data() : hs_.data() + (t - 1) * n * u;
      gemm(true, false, count, columns, n, 1.0f,
           (states != nullptr ? states + t * n * u : h_prev) + u0, u,
           drs_.data() + t * n * columns, columns, 1.0f, grad_recurrent + u0 * columns, columns);
    }
  }, 1);
  bias_grad(dxs_.data(), t_count * n, columns, grad_bias);
  if (recurrent_bias_) bias_grad(drs_.data(), t_count * n, columns, grad_bias + columns);
}

double Recurrent::flops_per_example() const {
  // Per step: the two products forward, and twice that backward (the gradients of the input and
  // of each kernel), beside the cell's own work.
  const double products = 2.0 * static_cast<double>((features_ + units_) * gates_ * units_);
  return static_cast<double>(steps_) * (3.0 * products + cell_flops());
}

double Recurrent::input_grad_flops_per_example() const {
  return 2.0 * static_cast<double>(steps_ * features_ * gates_ * units_);
}

LSTM::LSTM(std::string name, std::int64_t units, bool return_sequences, float forget_bias)
    : LSTM(std::move(name), units,
           RecurrentOptions{.return_sequences = return_sequences, .forget_bias = forget_bias}) {}

LSTM::LSTM(std::string name, std::int64_t units, const RecurrentOptions& options)
    : Recurrent("LSTM", std::move(name), units, 4, options, false),
      forget_bias_(options.forget_bias) {}

void LSTM::begin(std::int64_t steps, std::int64_t batch, bool backward, const float* state) {
  batch_ = batch;
  const std::int64_t u = units_, width = state_size();
  // The cell state's part of each row of `state`: c0 forward, dLoss/dc of the last step backward.
  Tensor& to = backward ? dc_ : c0_;
  if (state != nullptr) {
    to.resize({batch, u});
    for (std::int64_t b = 0; b < batch; ++b) std::copy_n(state + b * width + u, u, to.data() + b * u);
  }
  if (!backward) {
    cs_.resize({steps, batch, u});
    from_c0_ = state != nullptr;
    return;
  }
  if (state == nullptr) {
    dc_.resize({batch, u});
    dc_.set_zero();
  }
  tanh_c_.resize({intra_op_threads(), u});
}

void LSTM::final_cell_state(std::int64_t first, std::int64_t rows, float* state) const {
  const std::int64_t u = units_, width = state_size();
  const float* last = cs_.data() + (cs_.dim(0) - 1) * batch_ * u;
  for (std::int64_t b = first; b < first + rows; ++b)
    std::copy_n(last + b * u, u, state + b * width + u);
}

void LSTM::initial_cell_state_grad(std::int64_t first, std::int64_t rows, float* state) const {
  // dc_ holds what reached the cell state before step 0.
  const std::int64_t u = units_, width = state_size();
  for (std::int64_t b = first; b < first + rows; ++b)
    std::copy_n(dc_.data() + b * u, u, state + b * width + u);
}

const float* LSTM::c_prev(std::int64_t t, std::int64_t first) const {
  if (t > 0) return cs_.data() + ((t - 1) * batch_ + first) * units_;
  return from_c0_ ? c0_.data() + first * units_ : nullptr;
}

// The cells' element-wise work runs over whole gate blocks of one example as Eigen arrays:
// logistic and tanh vectorised at the instruction-set level the ops are compiled for.
void LSTM::step_forward(std::int64_t t, std::int64_t first, std::int64_t rows, float* x, float* r,
                        const float* /*h_prev*/, float* h) {
  const std::int64_t u = units_;
  float* c = cs_.data() + (t * batch_ + first) * u;
  const float* c_prev = this->c_prev(t, first);
  for (std::int64_t b = 0; b < rows; ++b) {
    // The i, f, g, o blocks of u; the activations replace the sums.
    float* gate = x + b * 4 * u;
    const float* rec = r + b * 4 * u;
    RowArray i(gate, u), f(gate + u, u), g(gate + 2 * u, u), o(gate + 3 * u, u);
    i = (i + ConstRowArray(rec, u)).logistic();
    f = (f + ConstRowArray(rec + u, u) + forget_bias_).logistic();
    g = (g + ConstRowArray(rec + 2 * u, u)).tanh();
    o = (o + ConstRowArray(rec + 3 * u, u)).logistic();
    RowArray cell(c + b * u, u);
    if (c_prev == nullptr) {
      cell = i * g;
    } else {
      cell = f * ConstRowArray(c_prev + b * u, u) + i * g;
    }
    RowArray(h + b * u, u) = o * cell.tanh();
  }
}

void LSTM::step_backward(std::int64_t t, std::int64_t first, std::int64_t rows, const float* dh,
                         const float* x, const float*, const float*, float* dx, float* dr, float*) {
  const std::int64_t u = units_;
  const float* c = cs_.data() + (t * batch_ + first) * u;
  const float* c_prev = this->c_prev(t, first);
  RowArray tanh_c(tanh_c_.data() + intra_op_thread_index() * u, u);  // this thread's
  for (std::int64_t b = 0; b < rows; ++b) {
    const float* gate = x + b * 4 * u;
    ConstRowArray i(gate, u), f(gate + u, u), g(gate + 2 * u, u), o(gate + 3 * u, u);
    ConstRowArray d_h(dh + b * u, u);
    float* d = dx + b * 4 * u;
    tanh_c = ConstRowArray(c + b * u, u).tanh();
    RowArray dc(dc_.data() + (first + b) * u, u);  // from the step after, then this step's
    dc += d_h * o * (1.0f - tanh_c.square());
    RowArray(d, u) = dc * g * i * (1.0f - i);
    if (c_prev == nullptr) {
      RowArray(d + u, u).setZero();
    } else {
      RowArray(d + u, u) = dc * ConstRowArray(c_prev + b * u, u) * f * (1.0f - f);
    }
    RowArray(d + 2 * u, u) = dc * i * (1.0f - g.square());
    RowArray(d + 3 * u, u) = d_h * tanh_c * o * (1.0f - o);
    dc *= f;  // what reaches the step before
  }
  // The input's and the last output's products enter each gate's sum alike.
  std::copy_n(dx, rows * 4 * u, dr);
}

void LSTM::carry(std::int64_t t, std::int64_t first, std::int64_t rows) {
  float* c = cs_.data() + (t * batch_ + first) * units_;
  const float* before = c_prev(t, first);
  if (before == nullptr) {
    std::fill_n(c, rows * units_, 0.0f);
  } else {
    std::copy_n(before, rows * units_, c);
  }
}

double LSTM::cell_flops() const { return 60.0 * static_cast<double>(units_); }

GRU::GRU(std::string name, std::int64_t units, bool return_sequences)
    : GRU(std::move(name), units, RecurrentOptions{.return_sequences = return_sequences}) {}

GRU::GRU(std::string name, std::int64_t units, const RecurrentOptions& options)
    : Recurrent("GRU", std::move(name), units, 3, options, true) {
  if (options.forget_bias != RecurrentOptions{}.forget_bias)
    throw InvalidArgument("GRU \"" + name_ + "\": forget_bias is an LSTM's; a GRU has no forget gate");
}

void GRU::step_forward(std::int64_t, std::int64_t, std::int64_t rows, float* x, float* r,
                       const float* h_prev, float* h) {
  const std::int64_t u = units_;
  for (std::int64_t b = 0; b < rows; ++b) {
    // The z, s, n blocks of u; the activations replace the sums.
    float* gate = x + b * 3 * u;
    const float* rec = r + b * 3 * u;
    RowArray z(gate, u), s(gate + u, u), candidate(gate + 2 * u, u);
    z = (z + ConstRowArray(rec, u)).logistic();
    s = (s + ConstRowArray(rec + u, u)).logistic();
    candidate = (candidate + s * ConstRowArray(rec + 2 * u, u)).tanh();
    RowArray(h + b * u, u) = z * ConstRowArray(h_prev + b * u, u) + (1.0f - z) * candidate;
  }
}

void GRU::step_backward(std::int64_t, std::int64_t, std::int64_t rows, const float* dh,
                        const float* x, const float* r, const float* h_prev, float* dx, float* dr,
                        float* dh_prev) {
  const std::int64_t u = units_;
  for (std::int64_t b = 0; b < rows; ++b) {
    const float* gate = x + b * 3 * u;
    ConstRowArray z(gate, u), s(gate + u, u), candidate(gate + 2 * u, u);
    ConstRowArray d_h(dh + b * u, u), prev(h_prev + b * u, u), r_n(r + b * 3 * u + 2 * u, u);
    float* d_x = dx + b * 3 * u;
    float* d_r = dr + b * 3 * u;
    RowArray dz(d_x, u), ds(d_x + u, u), dn(d_x + 2 * u, u);
    dz = d_h * (prev - candidate) * z * (1.0f - z);
    dn = d_h * (1.0f - z) * (1.0f - candidate.square());
    ds = dn * r_n * s * (1.0f - s);
    RowArray(d_r, u) = dz;
    RowArray(d_r + u, u) = ds;
    RowArray(d_r + 2 * u, u) = dn * s;
    if (dh_prev != nullptr) RowArray(dh_prev + b * u, u) += d_h * z;
  }
}

double GRU::cell_flops() const { return 45.0 * static_cast<double>(units_); }

namespace {

// `to` [n, steps, width] := `from` with the steps of each example in reverse order.
void reverse_steps(const float* from, std::int64_t n, std::int64_t steps, std::int64_t width,
                   float* to) {
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < steps; ++t)
      std::copy_n(from + (b * steps + t) * width, width, to + (b * steps + steps - 1 - t) * width);
}

}  // namespace

namespace {

// The state `layer` starts from when it takes one (a Recurrent built with initial_state), else 0.
std::int64_t initial_state_size(const Layer& layer) {
  const auto* recurrent = dynamic_cast<const Recurrent*>(&layer);
  return recurrent != nullptr && layer.num_inputs() == 2 ? recurrent->state_size() : 0;
}

}  // namespace

Bidirectional::Bidirectional(std::string name, std::unique_ptr<Layer> forward,
                             std::unique_ptr<Layer> backward)
    : name_(std::move(name)), forward_(std::move(forward)), backward_(std::move(backward)) {
  if (forward_ == nullptr || backward_ == nullptr)
    throw InvalidArgument("Bidirectional \"" + name_ + "\": needs a forward and a backward layer");
  if (forward_->name() == backward_->name())
    throw InvalidArgument("Bidirectional \"" + name_ + "\": its two layers are both named \"" +
                          forward_->name() + "\" and would share their variables");
  for (const Layer* inner : {forward_.get(), backward_.get()})
    if (inner->num_inputs() != 1 && initial_state_size(*inner) == 0)
      throw InvalidArgument("Bidirectional \"" + name_ + "\": its layer \"" + inner->name() + "\" takes " +
                            std::to_string(inner->num_inputs()) +
                            " inputs; a Bidirectional passes a sequence, and a recurrent layer's initial state");
  // Both layers, or neither, start from a given state or return theirs.
  const auto both_or_neither = [&](bool first, bool second, const char* does, const char* does_not) {
    if (first == second) return;
    throw InvalidArgument("Bidirectional \"" + name_ + "\": \"" + (first ? forward_ : backward_)->name() +
                          "\" " + does + " and \"" + (first ? backward_ : forward_)->name() + "\" " +
                          does_not + "; both or neither");
  };
  const auto returns_state = [](const Layer& inner) {
    const auto* recurrent = dynamic_cast<const Recurrent*>(&inner);
    return recurrent != nullptr && recurrent->returns_state();
  };
  both_or_neither(returns_state(*forward_), returns_state(*backward_), "returns its state", "its output");
  both_or_neither(initial_state_size(*forward_) > 0, initial_state_size(*backward_) > 0,
                  "takes an initial state", "does not");
  initial_state_ = initial_state_size(*forward_) > 0;
  // A layer owns the variables under its name (its gradients, its parameter count): the inner
  // layers' must be under this one's.
  for (const Layer* inner : {forward_.get(), backward_.get()})
    if (!inner->name().starts_with(name_ + "/"))
      throw InvalidArgument("Bidirectional \"" + name_ + "\": its layer \"" + inner->name() +
                            "\" must be named \"" + name_ + "/...\" (as \"" + name_ +
                            "/forward\"), so that its variables are the Bidirectional's");
}

void Bidirectional::check_inputs(std::size_t given) const {
  if (initial_state_ && given < 2)
    throw InvalidArgument("Bidirectional \"" + name_ + "\": its layers start from a given state "
                          "(initial_state): apply it to {sequence, state}");
}

Shape Bidirectional::build(Graph& graph, const Shape& input) {
  return build_inputs(graph, std::span(&input, 1));
}

void Bidirectional::forward(const Tensor& input, Tensor& output, const OpContext& context) {
  const Tensor* inputs[] = {&input};
  forward_inputs(inputs, output, context);
}

void Bidirectional::backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                             Tensor* grad_input, std::span<float> grads) {
  const Tensor* inputs[] = {&input};
  Tensor* grad_inputs[] = {grad_input};
  backward_inputs(inputs, output, grad_output, grad_inputs, grads);
}

Shape Bidirectional::build_inputs(Graph& graph, std::span<const Shape> inputs) {
  check_inputs(inputs.size());
  const Shape& input = inputs[0];
  const std::string what = "Bidirectional \"" + name_ + "\": input " + to_string(input);
  if (input.size() != 2 || input[0] < 1 || input[1] < 1)
    throw InvalidArgument(what + " is not [steps, features]");
  steps_ = input[0];
  features_ = input[1];
  forward_state_ = initial_state_size(*forward_);
  backward_state_ = initial_state_size(*backward_);
  if (initial_state_ && inputs[1] != Shape{forward_state_ + backward_state_})
    throw InvalidArgument("Bidirectional \"" + name_ + "\": initial state " + to_string(inputs[1]) + " is not [" +
                          std::to_string(forward_state_ + backward_state_) + "] (the forward layer's state [" +
                          std::to_string(forward_state_) + "], then the backward layer's [" +
                          std::to_string(backward_state_) + "])");
  std::vector<Shape> forward_inputs = {input}, backward_inputs = {input};
  if (initial_state_) {
    forward_inputs.push_back({forward_state_});
    backward_inputs.push_back({backward_state_});
  }
  if (masked()) {
    for (const Layer* inner : {forward_.get(), backward_.get()})
      if (!inner->takes_mask())
        throw InvalidArgument("Bidirectional \"" + name_ + "\" has a mask, which its layer \"" +
                              inner->name() + "\" does not take");
    forward_inputs.push_back({steps_});
    backward_inputs.push_back({steps_});
  }
  const Shape f = forward_->build_node(graph, forward_inputs);
  const Shape b = backward_->build_node(graph, backward_inputs);
  const bool f_sequences = f.size() == 2 && f[0] == steps_;
  const bool b_sequences = b.size() == 2 && b[0] == steps_;
  if ((f.size() != 1 && !f_sequences) || f_sequences != b_sequences || f.size() != b.size())
    throw InvalidArgument(what + ": its layers give " + to_string(f) + " and " + to_string(b) +
                          "; both must give [units] or both [" + std::to_string(steps_) +
                          ", units]");
  sequences_ = f_sequences;
  forward_units_ = f.back();
  backward_units_ = b.back();
  if (sequences_) return {steps_, forward_units_ + backward_units_};
  return {forward_units_ + backward_units_};
}

void Bidirectional::forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                                   const OpContext& context) {
  check_inputs(inputs.size());
  const Tensor& input = *inputs[0];
  const std::int64_t n = input.dim(0), uf = forward_units_, ub = backward_units_;
  reversed_.resize(input.shape());
  reverse_steps(input.data(), n, steps_, features_, reversed_.data());
  if (mask() != nullptr) {
    reversed_mask_.resize(mask()->shape());
    reverse_steps(mask()->data(), n, steps_, 1, reversed_mask_.data());
  }
  // The inner layers' inputs: the sequence (reversed for the backward one), its part of the
  // state, the mask.
  std::vector<const Tensor*> forward_in = {&input}, backward_in = {&reversed_};
  if (initial_state_) {
    const std::int64_t fs = forward_state_, bs = backward_state_;
    forward_initial_.resize({n, fs});
    backward_initial_.resize({n, bs});
    for (std::int64_t b = 0; b < n; ++b) {
      const float* row = inputs[1]->data() + b * (fs + bs);
      std::copy_n(row, fs, forward_initial_.data() + b * fs);
      std::copy_n(row + fs, bs, backward_initial_.data() + b * bs);
    }
    forward_in.push_back(&forward_initial_);
    backward_in.push_back(&backward_initial_);
  }
  if (mask() != nullptr) {
    forward_in.push_back(mask());
    backward_in.push_back(&reversed_mask_);
  }
  forward_->forward_node(forward_in, forward_out_, context);
  backward_->forward_node(backward_in, backward_out_, context);
  const std::int64_t positions = sequences_ ? steps_ : 1;
  output.resize(sequences_ ? Shape{n, steps_, uf + ub} : Shape{n, uf + ub});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < positions; ++t) {
      float* row = output.data() + (b * positions + t) * (uf + ub);
      std::copy_n(forward_out_.data() + (b * positions + t) * uf, uf, row);
      // The backward layer's step t read the input's step positions - 1 - t.
      std::copy_n(backward_out_.data() + (b * positions + positions - 1 - t) * ub, ub, row + uf);
    }
}

void Bidirectional::backward_inputs(std::span<const Tensor* const> inputs, const Tensor&,
                                    const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                                    std::span<float> grads) {
  check_inputs(inputs.size());
  const Tensor& input = *inputs[0];
  const std::int64_t n = input.dim(0), uf = forward_units_, ub = backward_units_;
  const std::int64_t positions = sequences_ ? steps_ : 1;
  forward_grad_.resize(forward_out_.shape());
  backward_grad_.resize(backward_out_.shape());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < positions; ++t) {
      const float* row = grad_output.data() + (b * positions + t) * (uf + ub);
      std::copy_n(row, uf, forward_grad_.data() + (b * positions + t) * uf);
      std::copy_n(row + uf, ub, backward_grad_.data() + (b * positions + positions - 1 - t) * ub);
    }
  Tensor* grad_input = grad_inputs[0];
  Tensor* grad_state = initial_state_ ? grad_inputs[1] : nullptr;
  std::vector<const Tensor*> forward_in = {&input}, backward_in = {&reversed_};
  std::vector<Tensor*> forward_grads = {grad_input != nullptr ? &forward_grad_input_ : nullptr};
  std::vector<Tensor*> backward_grads = {grad_input != nullptr ? &backward_grad_input_ : nullptr};
  if (initial_state_) {
    forward_in.push_back(&forward_initial_);
    backward_in.push_back(&backward_initial_);
    forward_grads.push_back(grad_state != nullptr ? &forward_grad_state_ : nullptr);
    backward_grads.push_back(grad_state != nullptr ? &backward_grad_state_ : nullptr);
  }
  if (mask() != nullptr) {
    forward_in.push_back(mask());
    backward_in.push_back(&reversed_mask_);
    forward_grads.push_back(nullptr);
    backward_grads.push_back(nullptr);
  }
  forward_->backward_node(forward_in, forward_out_, forward_grad_, forward_grads, grads);
  backward_->backward_node(backward_in, backward_out_, backward_grad_, backward_grads, grads);
  if (grad_state != nullptr) {
    const std::int64_t fs = forward_state_, bs = backward_state_;
    grad_state->resize({n, fs + bs});
    for (std::int64_t b = 0; b < n; ++b) {
      float* row = grad_state->data() + b * (fs + bs);
      std::copy_n(forward_grad_state_.data() + b * fs, fs, row);
      std::copy_n(backward_grad_state_.data() + b * bs, bs, row + fs);
    }
  }
  if (grad_input == nullptr) return;
  grad_input->resize(input.shape());
  reverse_steps(backward_grad_input_.data(), n, steps_, features_, grad_input->data());
  for (std::int64_t i = 0; i < grad_input->size(); ++i)
    (*grad_input)[i] += forward_grad_input_[i];
}

double Bidirectional::flops_per_example() const {
  return forward_->flops_per_example() + backward_->flops_per_example();
}

double Bidirectional::input_grad_flops_per_example() const {
  return forward_->input_grad_flops_per_example() + backward_->input_grad_flops_per_example();
}

std::unique_ptr<Layer> lstm(std::string name, std::int64_t units, bool return_sequences,
                            float forget_bias) {
  return std::make_unique<LSTM>(std::move(name), units, return_sequences, forget_bias);
}

std::unique_ptr<Layer> gru(std::string name, std::int64_t units, bool return_sequences) {
  return std::make_unique<GRU>(std::move(name), units, return_sequences);
}

std::unique_ptr<Layer> lstm(std::string name, std::int64_t units, const RecurrentOptions& options) {
  return std::make_unique<LSTM>(std::move(name), units, options);
}

std::unique_ptr<Layer> gru(std::string name, std::int64_t units, const RecurrentOptions& options) {
  return std::make_unique<GRU>(std::move(name), units, options);
}

std::unique_ptr<Layer> bidirectional(std::string name, std::unique_ptr<Layer> forward,
                                     std::unique_ptr<Layer> backward) {
  return std::make_unique<Bidirectional>(std::move(name), std::move(forward), std::move(backward));
}

}  // namespace cohort
