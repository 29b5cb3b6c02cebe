// --mode=local: one process, no communication.
#include "cohort/core/dist/modes/modes.h"

namespace cohort::modes {
namespace {

class LocalReplication final : public Replication {
 public:
  explicit LocalReplication(Optimizer& optimizer)
      : optimizer_(optimizer), in_place_(InPlaceUpdate::create(optimizer)) {}
  void start(std::span<float>, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds>) override {
    step_ = initial_step;
  }
  void before_step(std::span<float> values) override {
    if (in_place_) in_place_->begin(step_, values.size());
  }
  InPlaceUpdate* update_in_place() override { return in_place_.get(); }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    // What the layers did not update in place (all of it where no layer could, or with towers).
    if (in_place_)
      in_place_->finish(values, grads);
    else
      optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // the graph holds them
  std::vector<double> exchange_step_times(double mine) override { return {mine}; }

 private:
  Optimizer& optimizer_;
  std::unique_ptr<InPlaceUpdate> in_place_;  // null unless the optimizer can update in place
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Replication> local(Optimizer& optimizer) {
  return std::make_unique<LocalReplication>(optimizer);
}

}  // namespace cohort::modes
