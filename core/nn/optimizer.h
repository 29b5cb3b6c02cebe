#pragma once
// Optimizers over a graph's flat parameter buffer: SGD, Momentum (and Nesterov), Adam and AdamW,
// RMSProp, Adagrad, with learning-rate schedules on the global step and gradient clipping by
// global norm.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

/// The learning rate as a function of the global step.
struct LearningRateSchedule {
  enum class Kind { kConstant, kStep, kExponential, kCosine, kPolynomial, kPiecewise, kFunction };
  Kind kind = Kind::kConstant;
  double base = 0.01;
  /// kStep: multiply by decay_rate every decay_steps steps. kExponential:
  /// base * decay_rate^(step / decay_steps), continuous unless staircase. kCosine: from base down
  /// to base * decay_rate along half a cosine over decay_steps, then flat (TensorFlow's
  /// cosine_decay with alpha = decay_rate). kPolynomial: from base down to base * decay_rate as
  /// (1 - step / decay_steps)^power over decay_steps, then flat (TensorFlow's polynomial_decay
  /// with end_learning_rate = base * decay_rate; power 1 is a straight line).
  double decay_rate = 0.1;
  std::int64_t decay_steps = 1000;
  bool staircase = false;
  double power = 1.0;
  /// kPiecewise: base before boundaries[0], base * factors[i] from boundaries[i] on (increasing
  /// global steps, warm-up included, one factor each): PyTorch's MultiStepLR with factors gamma,
  /// gamma^2, ...; TensorFlow's piecewise_constant changes one step later (after a boundary).
  std::vector<std::int64_t> boundaries = {};
  std::vector<double> factors = {};
  /// kFunction: base * function(step), as PyTorch's LambdaLR; a rate that is negative or not
  /// finite is an InvalidArgument at the training step that would use it (Optimizer::
  /// learning_rate). Async workers may take a step or two past the run's last: a function
  /// defined for the run's steps alone should hold its last value past them.
  std::function<double(std::int64_t)> function = {};
  /// The first warmup_steps steps rise linearly to base (then the schedule runs from step 0 of
  /// its own, but for kPiecewise's boundaries): from base / warmup_steps, or where warmup_from
  /// is above 0, from about base * warmup_from (base * (warmup_from + (1 - warmup_from) /
  /// warmup_steps) at step 0).
  std::int64_t warmup_steps = 0;
  double warmup_from = 0.0;

  double at(std::int64_t step) const;
  /// "constant", "step", "exponential", "cosine", "polynomial" or "piecewise"; anything else is
  /// an InvalidArgument.
  static Kind parse_kind(const std::string& name);
  /// A schedule of `kind` ("constant", "cosine", "polynomial" or "exponential") for a run of
  /// `steps` global steps from `base`: after `warmup_steps` of linear warm-up (fewer than
  /// `steps`), over the rest, down to a tenth of `base` at the end. What a program's
  /// --lr_schedule gives without more flags. InvalidArgument for another kind or a warm-up as
  /// long as the run.
  static LearningRateSchedule for_run(const std::string& kind, double base, std::int64_t steps,
                                      std::int64_t warmup_steps = 0);
  /// Goyal et al.'s linear scaling rule, as Horovod programs apply it (the rate times
  /// hvd.size(), with a warm-up): this schedule, meant for one worker's batch, with its base times
  /// `batches` (the batches a global step averages, TrainerOptions::examples_per_global_step(
  /// workers) / batch_size: the workers in sync and allreduce modes, 1 in async and ssp) and,
  /// where it has no warm-up of its own, a linear one over `warmup_steps` (an epoch's global
  /// steps, say) from one batch's rate (the unscaled base: warmup_from = 1 / batches), as
  /// Goyal et al.'s and Horovod's LearningRateWarmupCallback's. It is taken out of a cosine or
  /// polynomial decay so that it still ends at the same step (a step or exponential decay keeps
  /// its period); one as long as that decay or longer leaves the decay a single step. Unchanged
  /// for `batches` of 1. InvalidArgument for `batches` below 1 or a negative warm-up.
  LearningRateSchedule linearly_scaled(std::int64_t batches, std::int64_t warmup_steps) const;
  /// InvalidArgument naming the first setting out of range for this kind.
  void check() const;
};

struct OptimizerOptions {
  std::string name = "sgd";  ///< "sgd", "momentum", "adam", "adamw", "rmsprop" or "adagrad"
  LearningRateSchedule learning_rate;
  double momentum = 0.9;     ///< momentum
  bool nesterov = false;     ///< momentum (another optimizer refuses it)
  double beta1 = 0.9;        ///< adam
  double beta2 = 0.999;      ///< adam
  double epsilon = 1e-8;     ///< adam, rmsprop (TensorFlow's RMSProp default is 1e-10)
  double rho = 0.9;          ///< rmsprop: decay of the mean square (TensorFlow's `decay`)
  double rmsprop_momentum = 0.0;  ///< rmsprop: momentum of its steps (TensorFlow's `momentum`)
  bool centered = false;     ///< rmsprop: divide by the gradient's variance, not its mean square
  double initial_accumulator = 0.1;  ///< adagrad: the sum of squares' starting value
  /// Clip gradients to this global L2 norm; 0 disables clipping. A norm that is not finite (a
  /// gradient of inf or NaN) makes every update value NaN, as TensorFlow's clip_by_global_norm.
  double clip_norm = 0.0;
  /// Weight decay on the decayed ranges (set_decay_ranges; the trainer gives the graph's
  /// kernels). "adamw" decouples it (Loshchilov and Hutter: values -= lr * wd * values beside the
  /// Adam step); every other optimizer adds wd * values to the gradient (L2 regularisation).
  double weight_decay = 0.0;
};

/// The optimizer and its settings in words, for run headers: "momentum 0.9 (Nesterov), weight
/// decay 0.0005", "adam (beta1 0.9, beta2 0.999, epsilon 1e-08), gradients clipped to norm 5".
/// The learning rate and its schedule are not part of it.
std::string describe(const OptimizerOptions& options);

/// Turns gradients into parameter updates. Optimizer state (momentum, Adam moments) is local to
/// the object: in async training every worker keeps its own, which is why any optimizer works
/// there. Formulas follow TensorFlow 1's (tf.train.MomentumOptimizer, AdamOptimizer,
/// RMSPropOptimizer with its mean square starting at 1, AdagradOptimizer); "adamw" is Adam with
/// decoupled weight decay.
///
/// Not thread-safe; one optimizer per worker process.
class Optimizer {
 public:
  /// Throws InvalidArgument for an unknown name ("sgd", "momentum", "adam", "adamw", "rmsprop",
  /// "adagrad") or out-of-range hyperparameters.
  static std::unique_ptr<Optimizer> create(const OptimizerOptions& options);
  virtual ~Optimizer() = default;

  const OptimizerOptions& options() const { return options_; }
  /// The schedule's learning rate at `step`, times learning_rate_scale().
  /// The rate of a step at global step `step`: the schedule's times the scale.
  double learning_rate(std::int64_t step) const;
  /// A factor on the schedule's learning rate from here on (1 at first): a reduction on a
  /// plateau (ValidationHook's reduce_lr_factor), which the trainer keeps in step with the
  /// chief's. InvalidArgument unless in (0, 1] (check_learning_rate_scale).
  void set_learning_rate_scale(double scale);
  static void check_learning_rate_scale(double scale);
  double learning_rate_scale() const { return learning_rate_scale_; }

  /// values += update(grad_scale * grads): the in-place update at global step `step`. The scale
  /// (a sum's 1/N, for the mean of N replicas' gradients) joins the optimizer's own pass over the
  /// gradients instead of costing one of its own; clipping and weight decay see the scaled
  /// gradients.
  void apply(std::span<float> values, std::span<const float> grads, std::int64_t step,
             float grad_scale = 1.0f);

  /// delta = update(grads), without touching values: what apply() would add. The optimizer's
  /// state advances exactly as apply() would advance it. Async workers push this delta. With
  /// weight decay the update depends on the parameters: pass them as `values` (the ones the
  /// gradients were computed at); without, InvalidArgument.
  void compute_delta(std::span<const float> grads, std::int64_t step, std::span<float> delta,
                     std::span<const float> values = {});

  /// The same update in pieces, for pushes that leave while the backward pass still runs and
  /// for a sync step applied while the other replicas pull: begin_pieces() once per step, then
  /// delta_piece() (compute_delta's delta) or apply_piece() (apply's in-place update) for
  /// disjoint ranges [first, first + grads.size()) that together cover the parameters, in any
  /// order. The pieces equal the matching ranges of the whole update bit for bit, and the state
  /// advances as it would. Clipping needs the norm of every gradient before any piece:
  /// InvalidArgument when set.
  void begin_pieces(std::int64_t step, std::size_t parameters);
  void delta_piece(std::int64_t first, std::span<const float> grads, std::span<float> delta,
                   std::span<const float> values = {});
  /// `plus` (empty, or as long as `grads`) is a second gradient added to `grads` as they are
  /// read: the update is for grad_scale * (grads + plus), without a pass of its own for the sum.
  void apply_piece(std::int64_t first, std::span<float> values, std::span<const float> grads,
                   float grad_scale = 1.0f, std::span<const float> plus = {});

  /// The ranges [begin, end) of the parameters that weight decay applies to; all of them until
  /// this is called.
  void set_decay_ranges(std::vector<std::pair<std::int64_t, std::int64_t>> ranges);
  /// The ranges [begin, end) of the parameters held as they are (frozen, as Keras's
  /// trainable = False or a var_list that leaves them out): no update, no decay, a zero delta,
  /// their slots untouched, and their gradients left out of the clipping norm. None until this
  /// is called.
  void set_frozen_ranges(std::vector<std::pair<std::int64_t, std::int64_t>> ranges);
  /// A factor on the learning rate for each range [begin, end) of the parameters (PyTorch's
  /// parameter groups: a pretrained backbone fine-tuned at a tenth of its new head's rate): the
  /// update of a range, weight decay's included, is the one at factor times the rate; 1 where no
  /// range says. The ranges are disjoint; a factor is finite and above 0 (a frozen range is
  /// set_frozen_ranges'). InvalidArgument otherwise.
  struct RateFactor {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    double factor = 1.0;
  };
  void set_rate_factors(std::vector<RateFactor> ranges);

  /// Global L2 norm of the last gradients seen, before clipping; measured only where clip_norm is
  /// set (the norm costs a pass over the gradients), 0 otherwise.
  double last_gradient_norm() const { return last_norm_; }

  /// Named state buffers (e.g. "momentum", "adam_m"), each as long as the parameters once the
  /// first update has run, for checkpoints. Empty for plain SGD.
  virtual std::vector<std::pair<std::string, std::span<float>>> slots() { return {}; }
  /// Makes the slots exist for `parameters` values (at their starting values), so a restore can
  /// fill them.
  virtual void prepare(std::size_t parameters) { static_cast<void>(parameters); }
  /// Updates made so far (Adam's bias correction counts them); restored with the slots.
  std::int64_t iterations() const { return iterations_; }
  void set_iterations(std::int64_t n) { iterations_ = n; }
  /// Starts afresh: slots (those that exist) at their starting values, iteration count 0.
  void reset() {
    for (auto& [name, slot] : slots()) std::fill(slot.begin(), slot.end(), initial_value(name));
    iterations_ = 0;
  }

 protected:
  explicit Optimizer(OptimizerOptions options) : options_(std::move(options)) {}
  /// Writes (accumulate=false) or adds (accumulate=true) the update for grad_scale * (grads +
  /// plus), the parameters from `first` on, into `out`; `plus` is empty or as long as `grads`.
  /// The state is prepared.
  virtual void update(std::int64_t first, std::span<const float> grads,
                      std::span<const float> plus, float grad_scale, double learning_rate,
                      std::span<float> out, bool accumulate) = 0;
  /// A slot's value before the first update: 0, but for RMSProp's mean square (1, as
  /// TensorFlow 1 starts it) and Adagrad's sum of squares (initial_accumulator).
  virtual float initial_value(const std::string& slot) const {
    static_cast<void>(slot);
    return 0.0f;
  }

 private:
  // The factor clipping multiplies grad_scale * grads by (the gradients of the parameters from
  // `first` on; frozen ones left out of the norm).
  float clip_scale(std::span<const float> grads, float grad_scale, std::int64_t first = 0);
  void run(std::span<const float> grads, float grad_scale, std::int64_t step, std::span<float> out,
           bool accumulate, std::span<const float> values);
  // The update of parameters [first, first + grads.size()) for grad_scale * (grads + plus) at
  // learning rate lr (`clip`: by the global norm of these gradients, without `plus`), once
  // iterations_ has counted the step and the state is prepared.
  void run_range(std::int64_t first, std::span<const float> grads, float grad_scale, double lr,
                 bool clip, std::span<float> out, bool accumulate,
                 std::span<const float> values, std::span<const float> plus = {});
  // InvalidArgument unless a piece of `gradients` values for an output of `out` lies within
  // begin_pieces()'s parameters from `first`.
  void check_piece(std::int64_t first, std::size_t gradients, std::size_t out) const;
  bool decoupled() const { return options_.name == "adamw"; }

  friend class InPlaceUpdate;
  OptimizerOptions options_;
  std::vector<std::pair<std::int64_t, std::int64_t>> decay_ranges_;
  bool decay_all_ = true;
  std::vector<std::pair<std::int64_t, std::int64_t>> frozen_;  // sorted, disjoint
  std::vector<RateFactor> rate_factors_;                       // sorted, disjoint
  std::vector<float> decayed_;  // gradients with the L2 term added
  double last_norm_ = 0.0;
  double learning_rate_scale_ = 1.0;
  std::int64_t iterations_ = 0;
  double piece_lr_ = 0.0;  // begin_pieces()'s learning rate and parameters, for its pieces
  std::int64_t piece_parameters_ = 0;
};

/// Plain SGD made by the layers inside the products that compute its gradients. A Dense kernel's
/// gradient x^T dz is a matrix product written to the gradient buffer, which the optimizer then
/// reads back beside the kernel in a pass of its own: for SGD, kernel := kernel + rate * x^T dz
/// is the same product added onto the kernel, and neither the pass nor the buffer is needed.
/// One step: begin(), the backward pass with this object in OpContext::update_in_place (each
/// layer that can updates a parameter and says so), then finish(), which applies the optimizer
/// to every other parameter as apply() would. The result is apply()'s up to rounding.
///
/// Only where nothing else reads the step's gradients: one process training alone with one
/// tower (the trainer's local mode). A layer computes whatever needs a parameter's old value
/// (its input gradient) before it updates the parameter. A step that throws part way leaves the
/// parameters updated so far updated.
class InPlaceUpdate {
 public:
  /// Null unless `optimizer` is SGD without clipping (clipping needs the whole gradient's norm
  /// before any update; the other optimizers' updates are not linear in the gradient).
  static std::unique_ptr<InPlaceUpdate> create(Optimizer& optimizer);

  /// Starts the update at global step `step` of a graph of `parameters` trainable values.
  void begin(std::int64_t step, std::size_t parameters);

  /// The factor r of parameters [begin, end)'s update w := w + r * g from their gradient g, or
  /// none: outside a step (no begin()), part of the range was updated already, or weight decay
  /// applies to it (decay stays in the optimizer's pass, where it is rounded with the gradient,
  /// not as a factor on w rounded once for the whole range).
  std::optional<float> rate(std::int64_t begin, std::int64_t end) const;
  /// Parameters [begin, end) were updated in place; their gradients are not read. Only for a
  /// range rate() gave a factor for.
  void applied(std::int64_t begin, std::int64_t end);

  /// Applies the optimizer to the parameters not updated in place, from `grads`, and ends the
  /// step.
  void finish(std::span<float> values, std::span<const float> grads);

 private:
  explicit InPlaceUpdate(Optimizer& optimizer) : optimizer_(optimizer) {}

  Optimizer& optimizer_;
  std::vector<std::pair<std::int64_t, std::int64_t>> applied_;  // this step's, in any order
  bool begun_ = false;
};

}  // namespace cohort
