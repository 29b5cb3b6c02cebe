// --mode=local: one process, no communication.
#include "cohort/core/dist/modes/modes.h"

namespace cohort::modes {
namespace {

class LocalReplication final : public Replication {
 public:
  explicit LocalReplication(Optimizer& optimizer) : optimizer_(optimizer) {}
  void start(std::span<float>, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds>) override {
    step_ = initial_step;
  }
  void before_step(std::span<float>) override {}
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // the graph holds them
  std::vector<double> exchange_step_times(double mine) override { return {mine}; }

 private:
  Optimizer& optimizer_;
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Replication> local(Optimizer& optimizer) {
  return std::make_unique<LocalReplication>(optimizer);
}

}  // namespace cohort::modes
