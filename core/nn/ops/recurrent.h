#pragma once
// Recurrent layers over sequences [steps, features]: LSTM and GRU, each returning its last
// output [units] or every step's [steps, units] (return_sequences: for another recurrent layer,
// or a Dense at every step), and Bidirectional. Both start from a zero state, or from one given
// as a second input (an encoder's final state, which a layer returns instead of its output when
// asked), and run forward in time; the backward pass is back-propagation through time over the
// whole sequence. Applied to
// {sequence, mask} (masking.h), a padded step leaves the state as it was and gives zeros, so
// that each example's last output is that of its last step read, wherever its padding is. The
// recurrences run step by step (each intra-op thread a slice of the batch), so a recurrent layer
// has no GPU path.
//
//   Model model(graph, {28, 28});                       // 28 steps of 28 features
//   model.add(lstm("lstm", 128)).add(dense("logits", 10));
//
//   Node state = model.apply(lstm("encoder", 64, {.return_state = true}), source);  // [h, c]
//   Node y = model.apply(lstm("decoder", 64, {.return_sequences = true, .initial_state = true}),
//                        {target, state});

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cohort/core/nn/layer.h"
#include "cohort/core/nn/ops/masking.h"
#include "cohort/core/nn/tensor.h"

namespace cohort {

/// How a recurrent layer is built beyond its units (Keras's LSTM and GRU arguments).
struct RecurrentOptions {
  /// Every step's output [steps, units], not the last step's alone.
  bool return_sequences = false;
  /// In training, each input feature of an example is zeroed at this rate (the others scaled by
  /// 1 / (1 - rate)), the same features at every step of the sequence: Keras's `dropout`, the
  /// variational dropout of Gal and Ghahramani (2016).
  float dropout = 0.0f;
  /// The same for the units of the last output where it enters the recurrent product: Keras's
  /// `recurrent_dropout`.
  float recurrent_dropout = 0.0f;
  /// LSTM: added to the forget gate's sum (LSTM's forget_bias); a GRU refuses another value.
  float forget_bias = 1.0f;
  /// The layer is applied to {sequence, state} (or {sequence, state, mask}) and starts from
  /// `state` instead of zeros: Keras's initial_state, PyTorch's (h_0, c_0). The state is
  /// [state_size()] per example: an LSTM's [2 units], h then c side by side; a GRU's [units].
  bool initial_state = false;
  /// The output is the final state [state_size()] instead of the last output (an LSTM's h, which
  /// is the last output, then c; a GRU's h): Keras's return_state, PyTorch's (h_n, c_n), for
  /// another layer to start from. Not with return_sequences: a layer gives one output.
  bool return_state = false;
};

/// What the recurrent layers share: the variables "<name>/kernel" [features, gates * units]
/// (Glorot uniform), "<name>/recurrent_kernel" [units, gates * units] (orthogonal) and
/// "<name>/bias" (zeros), both kernels decayed; the products of every step's input with the
/// kernel (one per step, before the recurrence) and of the last output with the recurrent
/// kernel; the dropout of RecurrentOptions (its masks a function of the step's seed and the
/// layer, as Dropout's); and back-propagation through time. A cell (LSTM, GRU) says what one
/// step computes from those products.
class Recurrent : public MaskableLayer {
 public:
  const std::string& name() const override { return name_; }
  /// 2 with RecurrentOptions::initial_state: {sequence, state}; else 1.
  int num_inputs() const override { return initial_state_ ? 2 : 1; }
  /// What the state holds per example: the output's units and the cell's own state.
  std::int64_t state_size() const { return units_ + cell_state_size(); }
  /// Whether the output is the final state (RecurrentOptions::return_state).
  bool returns_state() const { return return_state_; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 protected:
  /// `kind` names the class in messages; `gates`: how many blocks of `units` columns the kernels
  /// have; `recurrent_bias`: whether the bias is [2, gates * units], the second row added to the
  /// recurrent product (GRU's), rather than [gates * units]. InvalidArgument for a dropout rate
  /// outside [0, 1).
  Recurrent(const char* kind, std::string name, std::int64_t units, int gates,
            const RecurrentOptions& options, bool recurrent_bias);

  Shape build_inputs(Graph& graph, std::span<const Shape> inputs) override;
  void forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                      const OpContext& context) override;
  void backward_inputs(std::span<const Tensor* const> inputs, const Tensor& output,
                       const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                       std::span<float> grads) override;
  int masked_input() const override { return 0; }  // the sequence, not the state

  /// The floats of the cell's own state beyond the output (an LSTM's c), per example.
  virtual std::int64_t cell_state_size() const { return 0; }
  /// Called before the steps of a forward pass (backward false) or of a backward pass. `state`
  /// rows [batch, state_size()], the cell's own part from column `units`: in a forward pass the
  /// initial state (null: zeros); in a backward pass dLoss/d(the final state) (null: none).
  virtual void begin(std::int64_t steps, std::int64_t batch, bool backward,
                     const float* state) = 0;
  /// After a forward pass, the cell's own final state into rows [first, first + rows) of
  /// `state` [batch, state_size()], from column `units`.
  virtual void final_cell_state(std::int64_t /*first*/, std::int64_t /*rows*/,
                                float* /*state*/) const {}
  /// After a backward pass from an initial state, dLoss/d(the cell's own initial state) into the
  /// same place.
  virtual void initial_cell_state_grad(std::int64_t /*first*/, std::int64_t /*rows*/,
                                       float* /*state*/) const {}
  /// Step t forward for `rows` examples of the batch from example `first` (a thread's slice;
  /// the pointers are to the slice's first row): `x` holds the step's input times the kernel
  /// plus the bias, `r` the last output times the recurrent kernel (plus the recurrent bias),
  /// each [rows, gates * units]; the cell may overwrite both with what its backward pass needs.
  /// `h_prev` is the last output (the initial state's, or zeros, at step 0); writes this step's
  /// output into h [rows, units]. Slices run concurrently: a cell's own buffers are indexed by
  /// `first`.
  virtual void step_forward(std::int64_t t, std::int64_t first, std::int64_t rows, float* x,
                            float* r, const float* h_prev, float* h) = 0;
  /// Step t backward for the same slice, steps taken from the last to the first: `dh` is
  /// dLoss/dh_t, complete; `x`, `r` and `h_prev` as step_forward left and read them. Writes
  /// dLoss/d(x) into dx and dLoss/d(r) into dr, and adds to dh_prev (null at step 0) what
  /// reaches the last output other than through r.  (At step 0 dh_prev is null unless the
  /// layer started from a given state.)
  virtual void step_backward(std::int64_t t, std::int64_t first, std::int64_t rows,
                             const float* dh, const float* x, const float* r,
                             const float* h_prev, float* dx, float* dr, float* dh_prev) = 0;
  /// Step t for `rows` examples from `first` that the mask says are padding there: the cell
  /// keeps its own state as it was before the step (the base keeps the output). In the backward
  /// pass such rows are not taken to step_backward: whatever the cell sends back through its
  /// state passes them unchanged.
  virtual void carry(std::int64_t /*t*/, std::int64_t /*first*/, std::int64_t /*rows*/) {}
  /// Floating-point operations per example and step of a cell's own work, forward and backward.
  virtual double cell_flops() const = 0;

  const char* kind_;
  std::string name_;
  std::int64_t units_;
  int gates_;

 private:
  bool return_sequences_;
  bool initial_state_, return_state_;
  bool recurrent_bias_;
  float dropout_, recurrent_dropout_;
  std::string dropout_key_, recurrent_dropout_key_;  // the masks' names: "<name>/dropout", ...
  // Whether the last forward pass dropped inputs, and units of the last output.
  bool inputs_dropped_ = false, states_dropped_ = false;
  Graph* graph_ = nullptr;
  std::int64_t steps_ = 0, features_ = 0;
  std::int64_t kernel_offset_ = 0, recurrent_offset_ = 0, bias_offset_ = 0;
  // Time-major: step t's block of a batch is contiguous.
  Tensor xs_;     // [steps, batch, gates * units]: each step's x, as the cell left it
  Tensor rs_;     // [steps, batch, gates * units]: each step's r, as the cell left it
  Tensor hs_;     // [steps, batch, units]: each step's output
  Tensor h0_;     // [batch, units]: the output before the first step (the initial state's, or 0)
  bool from_state_ = false;                // the last forward pass started from a given state
  const Tensor* initial_ = nullptr;        // during a forward pass: the given state
  Tensor* grad_initial_ = nullptr;         // during a backward pass: its gradient, or null
  Tensor dxs_;    // [steps, batch, gates * units]: dLoss/dx of each step
  Tensor drs_;    // [steps, batch, gates * units]: dLoss/dr of each step
  Tensor dh_, dh_prev_;  // [batch, units]
  Tensor input_mask_;     // [batch, features]: the dropout's, the same at every step
  Tensor dropped_input_;  // [batch, steps, features]: the input times that mask
  Tensor state_mask_;     // [batch, units]: the recurrent dropout's
  Tensor dropped_states_;  // [steps, batch, units]: at t, the output of t - 1 times that mask
  Tensor grad_state_;      // [batch, units]: dLoss/d(a dropped output)
};

/// Long short-term memory (Hochreiter and Schmidhuber 1997), gates in Keras's order (input,
/// forget, cell, output): i, f, o = sigmoid, g = tanh of the input's and the last output's
/// products plus the bias; c = f c_prev + i g; h = o tanh(c). `forget_bias` is added to the
/// forget gate's sum (TensorFlow 1's LSTMCell: 1, so that a new layer remembers). Keras puts the
/// 1 into the bias's forget block (bias[units:2 units]) instead: weights from Keras need a
/// forget_bias of 0.
class LSTM final : public Recurrent {
 public:
  LSTM(std::string name, std::int64_t units, bool return_sequences = false,
       float forget_bias = 1.0f);
  LSTM(std::string name, std::int64_t units, const RecurrentOptions& options);

 protected:
  std::int64_t cell_state_size() const override { return units_; }
  void begin(std::int64_t steps, std::int64_t batch, bool backward, const float* state) override;
  void final_cell_state(std::int64_t first, std::int64_t rows, float* state) const override;
  void initial_cell_state_grad(std::int64_t first, std::int64_t rows, float* state) const override;
  void step_forward(std::int64_t t, std::int64_t first, std::int64_t rows, float* x, float* r,
                    const float* h_prev, float* h) override;
  void step_backward(std::int64_t t, std::int64_t first, std::int64_t rows, const float* dh,
                     const float* x, const float* r, const float* h_prev, float* dx, float* dr,
                     float* dh_prev) override;
  void carry(std::int64_t t, std::int64_t first, std::int64_t rows) override;
  double cell_flops() const override;

 private:
  // The cell state before step `t` of rows from `first`: c0_'s at step 0 (null for zeros).
  const float* c_prev(std::int64_t t, std::int64_t first) const;

  float forget_bias_;
  std::int64_t batch_ = 0;  // of the pass begin() started
  Tensor cs_;  // [steps, batch, units]: each step's cell state
  Tensor c0_;  // [batch, units]: the initial cell state, where one was given
  bool from_c0_ = false;
  Tensor dc_;  // [batch, units]: dLoss/dc of the step after the one being taken back
  Tensor tanh_c_;  // [threads, units]: each thread's tanh of one example's cell state
};

/// Gated recurrent unit (Cho et al. 2014) as Keras's GRU (reset_after, its default) and PyTorch's
/// and cuDNN's: gates in the order update, reset, candidate; z = sigmoid(x_z + r_z), s =
/// sigmoid(x_r + r_r), n = tanh(x_n + s r_n), h = z h_prev + (1 - z) n, where x_* are the
/// input's products plus the input bias (the bias's first row) and r_* the last output's plus
/// the recurrent bias (its second row).
class GRU final : public Recurrent {
 public:
  GRU(std::string name, std::int64_t units, bool return_sequences = false);
  GRU(std::string name, std::int64_t units, const RecurrentOptions& options);

 protected:
  void begin(std::int64_t, std::int64_t, bool, const float*) override {}
  void step_forward(std::int64_t t, std::int64_t first, std::int64_t rows, float* x, float* r,
                    const float* h_prev, float* h) override;
  void step_backward(std::int64_t t, std::int64_t first, std::int64_t rows, const float* dh,
                     const float* x, const float* r, const float* h_prev, float* dx, float* dr,
                     float* dh_prev) override;
  double cell_flops() const override;
};

/// Reads a sequence both ways (Keras's Bidirectional, its outputs concatenated): `forward` over
/// the sequence [steps, features] as it is, `backward` over it reversed in time, two layers of
/// their own named under this one's name ("<name>/forward" and "<name>/backward", or any other
/// "<name>/..."; a name outside it is refused, since a layer owns the variables under its name).
/// Each gives [units] (the last step it read) or [steps, units] (every step's, the backward
/// layer's put back in time order); the output is the two side by side along the last axis.
/// With a mask, each layer gets the mask of the steps it reads (the backward one's reversed), so
/// the backward layer starts at each example's last step read. Layers that return their state
/// (both, or neither) give their final states side by side (Keras's forward and backward states,
/// an LSTM's [h, c] each). Layers built to start from a given state (both, or neither) make the
/// Bidirectional one of {sequence, state} (or {sequence, state, mask}), the state the forward
/// layer's then the backward layer's side by side, as another Bidirectional returns them
/// (Keras's initial_state of a Bidirectional); the backward layer starts from its part at the
/// sequence's end.
class Bidirectional : public MaskableLayer {
 public:
  Bidirectional(std::string name, std::unique_ptr<Layer> forward, std::unique_ptr<Layer> backward);

  const std::string& name() const override { return name_; }
  /// 2 where the layers start from a given state: {sequence, state}; else 1.
  int num_inputs() const override { return initial_state_ ? 2 : 1; }
  Shape build(Graph& graph, const Shape& input) override;
  void forward(const Tensor& input, Tensor& output, const OpContext& context) override;
  void backward(const Tensor& input, const Tensor& output, const Tensor& grad_output,
                Tensor* grad_input, std::span<float> grads) override;
  double flops_per_example() const override;
  double input_grad_flops_per_example() const override;

 protected:
  Shape build_inputs(Graph& graph, std::span<const Shape> inputs) override;
  void forward_inputs(std::span<const Tensor* const> inputs, Tensor& output,
                      const OpContext& context) override;
  void backward_inputs(std::span<const Tensor* const> inputs, const Tensor& output,
                       const Tensor& grad_output, std::span<Tensor* const> grad_inputs,
                       std::span<float> grads) override;
  int masked_input() const override { return 0; }  // the sequence, not the state

 private:
  // InvalidArgument where the layers start from a given state and `given` inputs hold none (the
  // single-input forms, called directly).
  void check_inputs(std::size_t given) const;

  std::string name_;
  std::unique_ptr<Layer> forward_, backward_;
  bool initial_state_ = false;  // the layers start from a given state
  std::int64_t steps_ = 0, features_ = 0;
  std::int64_t forward_units_ = 0, backward_units_ = 0;
  std::int64_t forward_state_ = 0, backward_state_ = 0;  // the given state's parts
  bool sequences_ = false;  // the layers give every step's output
  Tensor reversed_;         // the input, reversed in time
  Tensor reversed_mask_;    // the mask, reversed in time
  Tensor forward_initial_, backward_initial_;  // the given state, split
  Tensor forward_out_, backward_out_;
  Tensor forward_grad_, backward_grad_;  // of the two outputs
  Tensor forward_grad_input_, backward_grad_input_;
  Tensor forward_grad_state_, backward_grad_state_;
};

/// Terse constructors.
std::unique_ptr<Layer> lstm(std::string name, std::int64_t units, bool return_sequences = false,
                            float forget_bias = 1.0f);
std::unique_ptr<Layer> gru(std::string name, std::int64_t units, bool return_sequences = false);
/// lstm("lstm", 64, {.return_sequences = true, .dropout = 0.2f, .recurrent_dropout = 0.2f}).
std::unique_ptr<Layer> lstm(std::string name, std::int64_t units, const RecurrentOptions& options);
std::unique_ptr<Layer> gru(std::string name, std::int64_t units, const RecurrentOptions& options);
/// bidirectional("encoder", lstm("encoder/forward", 64), lstm("encoder/backward", 64)).
std::unique_ptr<Layer> bidirectional(std::string name, std::unique_ptr<Layer> forward,
                                     std::unique_ptr<Layer> backward);

}  // namespace cohort
