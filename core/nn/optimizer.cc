#include "cohort/core/nn/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "cohort/core/base/error.h"

namespace cohort {

namespace {

// %g keeps 0.9 as "0.9" and 5e-4 as "0.0005", where std::to_string prints six decimals.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return std::string(text);
}

}  // namespace

double LearningRateSchedule::at(std::int64_t step) const {
  if (step < warmup_steps)
    return base * (warmup_from + (1.0 - warmup_from) * static_cast<double>(step + 1) /
                                     static_cast<double>(warmup_steps));
  if (kind != Kind::kPiecewise) step -= warmup_steps;  // its boundaries are global steps
  switch (kind) {
    case Kind::kConstant:
      return base;
    case Kind::kStep:
      return base * std::pow(decay_rate, static_cast<double>(step / decay_steps));
    case Kind::kExponential: {
      double exponent = static_cast<double>(step) / static_cast<double>(decay_steps);
      if (staircase) exponent = std::floor(exponent);
      return base * std::pow(decay_rate, exponent);
    }
    case Kind::kCosine: {
      const double progress =
          std::min(1.0, static_cast<double>(step) / static_cast<double>(decay_steps));
      const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
      return base * (decay_rate + (1.0 - decay_rate) * cosine);
    }
    case Kind::kPolynomial: {
      const double left =
          1.0 - std::min(1.0, static_cast<double>(step) / static_cast<double>(decay_steps));
      return base * (decay_rate + (1.0 - decay_rate) * std::pow(left, power));
    }
    case Kind::kPiecewise: {
      const auto passed = std::upper_bound(boundaries.begin(), boundaries.end(), step) -
                          boundaries.begin();
      return passed == 0 ? base : base * factors[static_cast<std::size_t>(passed - 1)];
    }
    case Kind::kFunction:
      return base * function(step);
  }
  return base;
}

double Optimizer::learning_rate(std::int64_t step) const {
  const LearningRateSchedule& schedule = options_.learning_rate;
  const double rate = schedule.at(step);
  // The user's function, whose values no check() can see: a step's rate is checked as it is
  // used (a checkpoint's record of the rate, or a warning on restore, take it as it is).
  if (schedule.kind == LearningRateSchedule::Kind::kFunction && !(rate >= 0 && std::isfinite(rate)))
    throw InvalidArgument("learning-rate schedule: the function gives a rate of " + number(rate) +
                          " at global step " + std::to_string(step) + " (" + number(schedule.base) +
                          " times its value); a rate must be a finite number >= 0");
  return rate * learning_rate_scale_;
}

void LearningRateSchedule::check() const {
  const auto bad = [](const std::string& what) {
    return InvalidArgument("learning-rate schedule: " + what);
  };
  if (base <= 0 || !std::isfinite(base))
    throw bad("the rate must be a positive number, got " + number(base));
  if (warmup_steps < 0) throw bad("warmup steps must be >= 0, got " + std::to_string(warmup_steps));
  if (!(warmup_from >= 0 && warmup_from < 1))
    throw bad("the warm-up's start must be in [0, 1) of the rate, got " + number(warmup_from));
  if (decay_steps <= 0) throw bad("decay steps must be > 0, got " + std::to_string(decay_steps));
  // A rate that decays: by a factor above 0 (step, exponential), or to a fraction of the base
  // in [0, 1] (cosine, polynomial); piecewise has factors of its own.
  if ((kind == Kind::kStep || kind == Kind::kExponential) && !(decay_rate > 0 && std::isfinite(decay_rate)))
    throw bad("the decay rate must be > 0, got " + number(decay_rate));
  if ((kind == Kind::kCosine || kind == Kind::kPolynomial) && !(decay_rate >= 0 && decay_rate <= 1))
    throw bad("the decay rate (the fraction of the rate it ends at) must be in [0, 1], got " +
              number(decay_rate));
  if (kind == Kind::kPolynomial && !(power > 0 && std::isfinite(power)))
    throw bad("polynomial power must be > 0, got " + number(power));
  if (kind == Kind::kPiecewise) {
    if (boundaries.empty()) throw bad("piecewise needs at least one boundary");
    if (factors.size() != boundaries.size())
      throw bad(std::to_string(boundaries.size()) + " boundaries but " +
                std::to_string(factors.size()) + " factors (one each)");
    for (std::size_t i = 0; i < boundaries.size(); ++i) {
      if (boundaries[i] <= (i == 0 ? 0 : boundaries[i - 1]))
        throw bad("piecewise boundaries must be positive and increasing, got " +
                  std::to_string(boundaries[i]) + (i == 0 ? "" : " after " + std::to_string(boundaries[i - 1])));
      if (!(factors[i] > 0 && std::isfinite(factors[i])))
        throw bad("piecewise factors must be positive, got " + number(factors[i]));
    }
  }
  if (kind == Kind::kFunction && !function) throw bad("kFunction without a function");
}

LearningRateSchedule::Kind LearningRateSchedule::parse_kind(const std::string& name) {
  if (name == "constant") return Kind::kConstant;
  if (name == "step") return Kind::kStep;
  if (name == "exponential") return Kind::kExponential;
  if (name == "cosine") return Kind::kCosine;
  if (name == "polynomial") return Kind::kPolynomial;
  if (name == "piecewise") return Kind::kPiecewise;
  throw InvalidArgument("unknown learning-rate schedule '" + name +
                        "' (known: constant, step, exponential, cosine, polynomial, piecewise)");
}

LearningRateSchedule LearningRateSchedule::for_run(const std::string& kind, double base, std::int64_t steps,
                                                   std::int64_t warmup_steps) {
  LearningRateSchedule schedule;
  schedule.kind = parse_kind(kind);
  if (schedule.kind == Kind::kPiecewise || schedule.kind == Kind::kStep)
    throw InvalidArgument("learning-rate schedule '" + kind +
                          "' needs its boundaries or step length: not for a run by its length");
  if (warmup_steps > 0 && warmup_steps >= steps)
    throw InvalidArgument("learning-rate schedule: a warm-up of " + std::to_string(warmup_steps) +
                          " steps is not shorter than the run of " + std::to_string(steps));
  schedule.base = base;
  schedule.warmup_steps = warmup_steps;
  schedule.decay_steps = std::max<std::int64_t>(1, steps - warmup_steps);
  schedule.check();
  return schedule;
}

LearningRateSchedule LearningRateSchedule::linearly_scaled(std::int64_t batches, std::int64_t warmup_steps) const {
  if (batches < 1 || warmup_steps < 0)
    throw InvalidArgument("learning-rate schedule: scaled for " + std::to_string(batches) + " batches with a warm-up of " +
                          std::to_string(warmup_steps) + " steps");
  LearningRateSchedule scaled = *this;
  if (batches == 1) return scaled;
  scaled.base *= static_cast<double>(batches);
  if (scaled.warmup_steps == 0 && warmup_steps > 0) {
    scaled.warmup_steps = warmup_steps;
    scaled.warmup_from = 1.0 / static_cast<double>(batches);
    // A decay over the run (cosine, polynomial) still ends where it did: the warm-up comes out
    // of it. A step or exponential decay keeps its period.
    if (kind == Kind::kCosine || kind == Kind::kPolynomial)
      scaled.decay_steps = std::max<std::int64_t>(1, decay_steps - warmup_steps);
  }
  return scaled;
}

namespace {

// The gradient an update reads at element i: g[i], or g[i] + plus[i] for two gradients summed
// as they are read. The optimizers' loops are written once over either.
struct Gradient {
  const float* __restrict g;
  float operator()(std::size_t i) const { return g[i]; }
};
struct SummedGradient {
  const float* __restrict g;
  const float* __restrict plus;
  float operator()(std::size_t i) const { return g[i] + plus[i]; }
};

template <typename Loop>
void with_gradient(std::span<const float> g, std::span<const float> plus, Loop&& loop) {
  if (plus.empty()) return loop(Gradient{g.data()});
  loop(SummedGradient{g.data(), plus.data()});
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& options) : Optimizer(options) {}

 protected:
  void update(std::int64_t, std::span<const float> g, std::span<const float> plus, float scale,
              double lr, std::span<float> out, bool accumulate) override {
    const float step = -static_cast<float>(lr) * scale;
    const std::size_t n = g.size();
    float* __restrict o = out.data();
    with_gradient(g, plus, [&](auto grad) {
      if (accumulate) {
        for (std::size_t i = 0; i < n; ++i) o[i] += step * grad(i);
      } else {
        for (std::size_t i = 0; i < n; ++i) o[i] = step * grad(i);
      }
    });
  }
};

class Momentum final : public Optimizer {
 public:
  explicit Momentum(const OptimizerOptions& options) : Optimizer(options) {}
  std::vector<std::pair<std::string, std::span<float>>> slots() override {
    return {{"momentum", accum_}};
  }
  void prepare(std::size_t n) override {
    if (accum_.size() != n) accum_.assign(n, 0.0f);
  }

 protected:
  // TensorFlow: accum = m * accum + g; var -= lr * accum (Nesterov: var -= lr * (g + m * accum)).
  void update(std::int64_t first, std::span<const float> g, std::span<const float> plus,
              float scale, double lr, std::span<float> out, bool accumulate) override {
    const float m = static_cast<float>(options().momentum);
    const float rate = static_cast<float>(lr);
    const bool nesterov = options().nesterov;
    float* __restrict a = accum_.data() + first;
    float* __restrict o = out.data();
    const std::size_t n = g.size();
    with_gradient(g, plus, [&](auto grad) {
      for (std::size_t i = 0; i < n; ++i) {
        const float gi = grad(i) * scale;
        a[i] = m * a[i] + gi;
        const float d = -rate * (nesterov ? gi + m * a[i] : a[i]);
        o[i] = accumulate ? o[i] + d : d;
      }
    });
  }

 private:
  std::vector<float> accum_;
};

class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerOptions& options) : Optimizer(options) {}
  std::vector<std::pair<std::string, std::span<float>>> slots() override {
    return {{"adam_m", m_}, {"adam_v", v_}};
  }
  void prepare(std::size_t n) override {
    if (m_.size() != n) m_.assign(n, 0.0f), v_.assign(n, 0.0f);
  }

 protected:
  // TensorFlow: lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); var -= lr_t * m / (sqrt(v) + eps).
  // t counts this optimizer's own updates (iterations()), so bias correction is right for an
  // async worker whose global step jumps by other workers' pushes.
  void update(std::int64_t first, std::span<const float> g, std::span<const float> plus,
              float scale, double lr, std::span<float> out, bool accumulate) override {
    const auto t = static_cast<double>(iterations());
    const double b1 = options().beta1, b2 = options().beta2;
    const float lr_t = static_cast<float>(lr * std::sqrt(1.0 - std::pow(b2, t)) /
                                          (1.0 - std::pow(b1, t)));
    const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    const float eps = static_cast<float>(options().epsilon);
    float* __restrict m = m_.data() + first;
    float* __restrict v = v_.data() + first;
    float* __restrict o = out.data();
    const std::size_t n = g.size();
    with_gradient(g, plus, [&](auto grad) {
      for (std::size_t i = 0; i < n; ++i) {
        const float gi = grad(i) * scale;
        m[i] = fb1 * m[i] + (1.0f - fb1) * gi;
        v[i] = fb2 * v[i] + (1.0f - fb2) * gi * gi;
        const float d = -lr_t * m[i] / (std::sqrt(v[i]) + eps);
        o[i] = accumulate ? o[i] + d : d;
      }
    });
  }

 private:
  std::vector<float> m_, v_;
};

class RmsProp final : public Optimizer {
 public:
  explicit RmsProp(const OptimizerOptions& options) : Optimizer(options) {}
  std::vector<std::pair<std::string, std::span<float>>> slots() override {
    std::vector<std::pair<std::string, std::span<float>>> named{{"rms", ms_}};
    if (options().centered) named.emplace_back("rms_mg", mg_);
    if (options().rmsprop_momentum > 0) named.emplace_back("rms_momentum", momentum_);
    return named;
  }
  void prepare(std::size_t n) override {
    if (ms_.size() == n) return;
    ms_.assign(n, 1.0f);
    if (options().centered) mg_.assign(n, 0.0f);
    if (options().rmsprop_momentum > 0) momentum_.assign(n, 0.0f);
  }

 protected:
  // TensorFlow 1: ms = rho * ms + (1 - rho) * g^2 (centered: mg = rho * mg + (1 - rho) * g, and
  // ms - mg^2 in place of ms below); mom = momentum * mom + lr * g / sqrt(ms + eps); var -= mom.
  void update(std::int64_t first, std::span<const float> g, std::span<const float> plus,
              float scale, double lr, std::span<float> out, bool accumulate) override {
    const float rho = static_cast<float>(options().rho);
    const float eps = static_cast<float>(options().epsilon);
    const float m = static_cast<float>(options().rmsprop_momentum);
    const float rate = static_cast<float>(lr);
    const bool centered = options().centered, with_momentum = m > 0;
    float* __restrict ms = ms_.data() + first;
    float* __restrict mg = centered ? mg_.data() + first : nullptr;
    float* __restrict mom = with_momentum ? momentum_.data() + first : nullptr;
    float* __restrict o = out.data();
    const std::size_t n = g.size();
    with_gradient(g, plus, [&](auto grad) {
      for (std::size_t i = 0; i < n; ++i) {
        const float gi = grad(i) * scale;
        ms[i] = rho * ms[i] + (1.0f - rho) * gi * gi;
        float mean_square = ms[i];
        if (centered) {
          mg[i] = rho * mg[i] + (1.0f - rho) * gi;
          mean_square -= mg[i] * mg[i];
        }
        float step = rate * gi / std::sqrt(mean_square + eps);
        if (with_momentum) step = mom[i] = m * mom[i] + step;
        o[i] = accumulate ? o[i] - step : -step;
      }
    });
  }
  float initial_value(const std::string& slot) const override { return slot == "rms" ? 1.0f : 0.0f; }

 private:
  std::vector<float> ms_, mg_, momentum_;
};

class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerOptions& options) : Optimizer(options) {}
  std::vector<std::pair<std::string, std::span<float>>> slots() override {
    return {{"accumulator", accum_}};
  }
  void prepare(std::size_t n) override {
    if (accum_.size() != n) accum_.assign(n, initial_value("accumulator"));
  }

 protected:
  // TensorFlow 1: accum += g^2; var -= lr * g / sqrt(accum).
  void update(std::int64_t first, std::span<const float> g, std::span<const float> plus,
              float scale, double lr, std::span<float> out, bool accumulate) override {
    const float rate = static_cast<float>(lr);
    float* __restrict a = accum_.data() + first;
    float* __restrict o = out.data();
    const std::size_t n = g.size();
    with_gradient(g, plus, [&](auto grad) {
      for (std::size_t i = 0; i < n; ++i) {
        const float gi = grad(i) * scale;
        a[i] += gi * gi;
        const float d = -rate * gi / std::sqrt(a[i]);
        o[i] = accumulate ? o[i] + d : d;
      }
    });
  }
  float initial_value(const std::string&) const override {
    return static_cast<float>(options().initial_accumulator);
  }

 private:
  std::vector<float> accum_;
};

}  // namespace

std::string describe(const OptimizerOptions& options) {
  std::string text = options.name;
  if (options.name == "momentum")
    text += " " + number(options.momentum) + (options.nesterov ? " (Nesterov)" : "");
  if (options.name == "adam" || options.name == "adamw")
    text += " (beta1 " + number(options.beta1) + ", beta2 " + number(options.beta2) +
            ", epsilon " + number(options.epsilon) + ")";
  if (options.name == "rmsprop")
    text += std::string(options.centered ? " centered" : "") + " (rho " + number(options.rho) +
            ", momentum " + number(options.rmsprop_momentum) + ", epsilon " +
            number(options.epsilon) + ")";
  if (options.name == "adagrad")
    text += " (initial accumulator " + number(options.initial_accumulator) + ")";
  if (options.weight_decay > 0)
    text += (options.name == "adamw" ? ", decoupled weight decay " : ", weight decay ") +
            number(options.weight_decay);
  if (options.clip_norm > 0) text += ", gradients clipped to norm " + number(options.clip_norm);
  return text;
}

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerOptions& options) {
  const auto bad = [](const std::string& what) { return InvalidArgument("optimizer: " + what); };
  options.learning_rate.check();
  if (!(options.clip_norm >= 0)) throw bad("clip norm must be >= 0, got " + number(options.clip_norm));
  if (options.weight_decay < 0 || !std::isfinite(options.weight_decay))
    throw bad("weight decay must be >= 0, got " + number(options.weight_decay));
  if (options.nesterov && options.name != "momentum")
    throw bad("Nesterov momentum needs the momentum optimizer, not " + options.name);
  if (options.name == "sgd") return std::make_unique<Sgd>(options);
  if (options.name == "momentum") {
    if (!(options.momentum >= 0 && options.momentum < 1))
      throw bad("momentum must be in [0, 1), got " + number(options.momentum));
    return std::make_unique<Momentum>(options);
  }
  if (options.name == "adam" || options.name == "adamw") {
    if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1))
      throw bad("adam betas must be in [0, 1), got " + number(options.beta1) + " and " + number(options.beta2));
    if (!(options.epsilon > 0 && std::isfinite(options.epsilon)))
      throw bad("adam epsilon must be > 0, got " + number(options.epsilon));
    return std::make_unique<Adam>(options);
  }
  if (options.name == "rmsprop") {
    if (!(options.rho >= 0 && options.rho < 1))
      throw bad("rmsprop rho must be in [0, 1), got " + number(options.rho));
    if (!(options.rmsprop_momentum >= 0 && options.rmsprop_momentum < 1))
      throw bad("rmsprop momentum must be in [0, 1), got " + number(options.rmsprop_momentum));
    if (!(options.epsilon > 0 && std::isfinite(options.epsilon)))
      throw bad("rmsprop epsilon must be > 0, got " + number(options.epsilon));
    return std::make_unique<RmsProp>(options);
  }
  if (options.name == "adagrad") {
    if (!(options.initial_accumulator > 0) || !std::isfinite(options.initial_accumulator))
      throw bad("adagrad initial accumulator must be > 0, got " +
                number(options.initial_accumulator));
    return std::make_unique<Adagrad>(options);
  }
  throw InvalidArgument("unknown optimizer '" + options.name +
                        "' (known: sgd, momentum, adam, adamw, rmsprop, adagrad)");
}

float Optimizer::clip_scale(std::span<const float> grads, float grad_scale, std::int64_t first) {
  // The norm costs a pass over the gradients: only pay for it when clipping.
  if (options_.clip_norm <= 0) return 1.0f;
  double sum = 0.0;
  const auto add = [&](std::int64_t begin, std::int64_t end) {  // indices into grads
    for (std::int64_t i = begin; i < end; ++i)
      sum += static_cast<double>(grads[static_cast<std::size_t>(i)]) * grads[static_cast<std::size_t>(i)];
  };
  // The trainable stretches' alone: frozen gradients are not the update's.
  const auto last = first + static_cast<std::int64_t>(grads.size());
  std::int64_t next = first;
  for (const auto& [begin, end] : frozen_) {
    if (end <= first || begin >= last) continue;
    add(next - first, std::max(begin, first) - first);
    next = std::min(end, last);
  }
  add(next - first, last - first);
  last_norm_ = std::sqrt(sum) * std::abs(static_cast<double>(grad_scale));
  // A norm that overflowed has no direction to keep: every value takes NaN, as TensorFlow's
  // clip_by_global_norm and PyTorch's clip_grad_norm_ give, so that the step's NaN is found (the
  // NaN guard) rather than its other gradients applied unclipped.
  if (!std::isfinite(last_norm_)) return std::numeric_limits<float>::quiet_NaN();
  if (last_norm_ <= options_.clip_norm) return 1.0f;
  return static_cast<float>(options_.clip_norm / last_norm_);
}

void Optimizer::set_decay_ranges(std::vector<std::pair<std::int64_t, std::int64_t>> ranges) {
  decay_ranges_ = std::move(ranges);
  decay_all_ = false;
}

void Optimizer::set_rate_factors(std::vector<RateFactor> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const RateFactor& a, const RateFactor& b) { return a.begin < b.begin; });
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const RateFactor& r = ranges[i];
    const std::string range = "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
    if (r.begin < 0 || r.end < r.begin)
      throw InvalidArgument("optimizer: learning-rate range " + range + " is not a range of parameters");
    if (!(r.factor > 0) || !std::isfinite(r.factor))
      throw InvalidArgument("optimizer: learning-rate factor " + std::to_string(r.factor) + " for " + range +
                            ": expected a finite factor above 0 (a frozen range is set_frozen_ranges')");
    if (i > 0 && r.begin < ranges[i - 1].end)
      throw InvalidArgument("optimizer: learning-rate ranges overlap at " + range);
  }
  rate_factors_ = std::move(ranges);
}

void Optimizer::set_frozen_ranges(std::vector<std::pair<std::int64_t, std::int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  frozen_.clear();
  for (const auto& [begin, end] : ranges) {
    if (begin < 0 || end < begin)
      throw InvalidArgument("optimizer: frozen range [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") is not a range of parameters");
    if (begin == end) continue;
    if (!frozen_.empty() && begin <= frozen_.back().second)
      frozen_.back().second = std::max(frozen_.back().second, end);
    else
      frozen_.emplace_back(begin, end);
  }
}

void Optimizer::run(std::span<const float> grads, float grad_scale, std::int64_t step,
                    std::span<float> out, bool accumulate, std::span<const float> values) {
  if (out.size() != grads.size())
    throw InvalidArgument("optimizer: " + std::to_string(grads.size()) + " gradients for " +
                          std::to_string(out.size()) + " parameters");
  ++iterations_;
  prepare(grads.size());
  run_range(0, grads, grad_scale, learning_rate(step), /*clip=*/true, out, accumulate, values);
}

void Optimizer::run_range(std::int64_t first, std::span<const float> grads, float grad_scale,
                          double lr, bool clip, std::span<float> out, bool accumulate,
                          std::span<const float> values, std::span<const float> plus) {
  const float wd = static_cast<float>(options_.weight_decay);
  if (wd > 0 && values.size() != grads.size())
    throw InvalidArgument("optimizer: weight decay needs the parameters beside the gradients");
  // Each decayed range's overlap with [first, last) and [begin, end), as indices into this
  // range's spans.
  const auto last = first + static_cast<std::int64_t>(grads.size());
  const auto each_decayed = [&](std::int64_t begin, std::int64_t end, auto&& f) {
    if (decay_all_) {
      f(begin - first, end - first);
      return;
    }
    for (const auto& [b, e] : decay_ranges_)
      if (std::max({b, first, begin}) < std::min({e, last, end}))
        f(std::max({b, first, begin}) - first, std::min({e, last, end}) - first);
  };
  if (wd > 0 && !decoupled()) {
    // L2 regularisation: the gradient of wd/2 |w|^2 joins the loss's before clipping.
    decayed_.resize(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i)
      decayed_[i] = grad_scale * (plus.empty() ? grads[i] : grads[i] + plus[i]);
    each_decayed(first, last, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) decayed_[i] += wd * values[i];
    });
    grads = decayed_;
    plus = {};
    grad_scale = 1.0f;
  }
  const float scale = grad_scale * (clip ? clip_scale(grads, grad_scale, first) : 1.0f);
  // The parameters [begin, end), not frozen, at learning rate `rate`: AdamW's decay acts on them
  // directly, scaled by the rate, from their values before this step (applied first in place;
  // added after a delta is written).
  const auto train = [&](std::int64_t begin, std::int64_t end, double rate) {
    if (begin >= end) return;
    const auto at = static_cast<std::size_t>(begin - first);
    const auto n = static_cast<std::size_t>(end - begin);
    const auto decay = [&] {
      const float decay_rate = static_cast<float>(rate) * wd;
      each_decayed(begin, end, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) out[i] -= decay_rate * values[i];
      });
    };
    if (wd > 0 && decoupled() && accumulate) decay();
    update(begin, grads.subspan(at, n), plus.empty() ? plus : plus.subspan(at, n), scale, rate,
           out.subspan(at, n), accumulate);
    if (wd > 0 && decoupled() && !accumulate) decay();
  };
  // [begin, end) in its stretches of one learning-rate factor each.
  const auto train_by_factor = [&](std::int64_t begin, std::int64_t end) {
    for (const RateFactor& r : rate_factors_) {
      if (r.end <= begin || r.begin >= end) continue;
      train(begin, std::max(r.begin, begin), lr);
      train(std::max(r.begin, begin), std::min(r.end, end), lr * r.factor);
      begin = std::min(r.end, end);
    }
    train(begin, end, lr);
  };
  // Between the frozen ranges; a frozen stretch's delta is zero.
  std::int64_t next = first;
  for (const auto& [begin, end] : frozen_) {
    if (end <= first || begin >= last) continue;
    train_by_factor(next, std::max(begin, first));
    next = std::min(end, last);
    if (!accumulate) std::fill(out.begin() + (std::max(begin, first) - first), out.begin() + (next - first), 0.0f);
  }
  train_by_factor(next, last);
}

void Optimizer::check_learning_rate_scale(double scale) {
  if (!(scale > 0 && scale <= 1))
    throw InvalidArgument("learning rate scale " + std::to_string(scale) + ": expected a factor in (0, 1]");
}

void Optimizer::set_learning_rate_scale(double scale) {
  check_learning_rate_scale(scale);
  learning_rate_scale_ = scale;
}

void Optimizer::apply(std::span<float> values, std::span<const float> grads, std::int64_t step,
                      float grad_scale) {
  run(grads, grad_scale, step, values, /*accumulate=*/true, values);
}

void Optimizer::compute_delta(std::span<const float> grads, std::int64_t step,
                              std::span<float> delta, std::span<const float> values) {
  run(grads, 1.0f, step, delta, /*accumulate=*/false, values);
}

void Optimizer::begin_pieces(std::int64_t step, std::size_t parameters) {
  if (options_.clip_norm > 0)
    throw InvalidArgument("optimizer: an update in pieces cannot be clipped (clipping needs the "
                          "norm of the whole gradient before any piece)");
  ++iterations_;
  prepare(parameters);
  piece_lr_ = learning_rate(step);
  piece_parameters_ = static_cast<std::int64_t>(parameters);
}

void Optimizer::check_piece(std::int64_t first, std::size_t gradients, std::size_t out) const {
  if (out != gradients)
    throw InvalidArgument("optimizer: " + std::to_string(gradients) + " gradients for a " +
                          std::to_string(out) + "-value piece");
  const auto last = first + static_cast<std::int64_t>(gradients);
  if (first < 0 || last > piece_parameters_)
    throw InvalidArgument("optimizer: piece [" + std::to_string(first) + ", " +
                          std::to_string(last) + ") outside the " +
                          std::to_string(piece_parameters_) + " parameters of begin_pieces()");
}

void Optimizer::delta_piece(std::int64_t first, std::span<const float> grads,
                            std::span<float> delta, std::span<const float> values) {
  check_piece(first, grads.size(), delta.size());
  run_range(first, grads, 1.0f, piece_lr_, /*clip=*/false, delta, /*accumulate=*/false, values);
}

void Optimizer::apply_piece(std::int64_t first, std::span<float> values,
                            std::span<const float> grads, float grad_scale,
                            std::span<const float> plus) {
  check_piece(first, grads.size(), values.size());
  if (!plus.empty() && plus.size() != grads.size())
    throw InvalidArgument("optimizer: " + std::to_string(plus.size()) + " gradients to add to " +
                          std::to_string(grads.size()));
  run_range(first, grads, grad_scale, piece_lr_, /*clip=*/false, values, /*accumulate=*/true,
            values, plus);
}

std::unique_ptr<InPlaceUpdate> InPlaceUpdate::create(Optimizer& optimizer) {
  if (optimizer.options().name != "sgd" || optimizer.options().clip_norm > 0) return nullptr;
  return std::unique_ptr<InPlaceUpdate>(new InPlaceUpdate(optimizer));
}

void InPlaceUpdate::begin(std::int64_t step, std::size_t parameters) {
  optimizer_.begin_pieces(step, parameters);
  applied_.clear();
  begun_ = true;
}

namespace {

// Whether [begin, end) meets any of `ranges`.
bool overlaps(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, std::int64_t begin,
              std::int64_t end) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& range) {
    return std::max(range.first, begin) < std::min(range.second, end);
  });
}

}  // namespace

std::optional<float> InPlaceUpdate::rate(std::int64_t begin, std::int64_t end) const {
  if (!begun_ || begin < 0 || end > optimizer_.piece_parameters_ || begin >= end ||
      overlaps(applied_, begin, end))
    return std::nullopt;
  if (optimizer_.options().weight_decay > 0 &&
      (optimizer_.decay_all_ || overlaps(optimizer_.decay_ranges_, begin, end)))
    return std::nullopt;
  if (overlaps(optimizer_.frozen_, begin, end)) return std::nullopt;  // finish() leaves them
  for (const Optimizer::RateFactor& r : optimizer_.rate_factors_)  // another rate: the optimizer's
    if (std::max(r.begin, begin) < std::min(r.end, end)) return std::nullopt;
  return -static_cast<float>(optimizer_.piece_lr_);  // Sgd::update's step
}

void InPlaceUpdate::applied(std::int64_t begin, std::int64_t end) {
  if (!rate(begin, end))
    throw InvalidArgument("InPlaceUpdate: parameters [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") cannot have been updated in place");
  applied_.emplace_back(begin, end);
}

void InPlaceUpdate::finish(std::span<float> values, std::span<const float> grads) {
  if (!begun_) throw InvalidArgument("InPlaceUpdate: finish() without begin()");
  if (grads.size() != values.size() ||
      static_cast<std::int64_t>(values.size()) != optimizer_.piece_parameters_)
    throw InvalidArgument("InPlaceUpdate: " + std::to_string(grads.size()) + " gradients for " +
                          std::to_string(values.size()) + " parameters, begun for " +
                          std::to_string(optimizer_.piece_parameters_));
  std::sort(applied_.begin(), applied_.end());
  std::int64_t next = 0;
  const auto apply_up_to = [&](std::int64_t end) {
    if (end > next)
      optimizer_.apply_piece(next, values.subspan(next, end - next), grads.subspan(next, end - next));
  };
  for (const auto& [begin, end] : applied_) {
    apply_up_to(begin);
    next = std::max(next, end);
  }
  apply_up_to(static_cast<std::int64_t>(values.size()));
  applied_.clear();
  begun_ = false;
}

}  // namespace cohort
