// --mode=allreduce: Horovod's scheme on MPI. Every replica sums the gradients with in-place
// MPI_Allreduce in fused pieces, averages and applies the same update, so the parameters stay
// identical without any ps. With --compression=bf16 the pieces travel as bfloat16, with error
// feedback (fusion.h); every replica still gets the same sum, so they stay identical.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/modes/modes.h"

namespace cohort::modes {
namespace {

class AllreduceReplication final : public Replication {
 public:
  AllreduceReplication(Server& server, Optimizer& optimizer, const ReplicationOptions& options)
      : comm_(server.replicas()),
        optimizer_(optimizer),
        fusion_bytes_(options.fusion_bytes),
        compression_(options.compression) {}
  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds>) override {
    comm_.bcast(values, kChief);  // everyone starts from the chief's parameters
    step_ = comm_.allreduce(initial_step, mpi::Op::kMax);
  }
  void before_step(std::span<float>) override {}
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    if (compression_ == Compression::kBf16) {
      if (residual_.size() != grads.size()) residual_.assign(grads.size(), 0.0f);
      bytes_sent_ += allreduce_fused_bf16(comm_, grads, residual_, wire_, fusion_bytes_);
    } else {
      allreduce_fused(comm_, grads, fusion_bytes_);
      bytes_sent_ += static_cast<std::int64_t>(grads.size_bytes());
    }
    const float scale = 1.0f / static_cast<float>(comm_.size());
    for (float& g : grads) g *= scale;
    optimizer_.apply(values, grads, step_);
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  std::int64_t gradient_bytes_sent() const override { return bytes_sent_; }
  std::string stats() const override {
    return std::string("gradients on the wire as ") +
           (compression_ == Compression::kBf16 ? "bfloat16" : "float32") + ": " +
           std::to_string(bytes_sent_) + " bytes";
  }
  void finish() override {}
  void fetch_parameters(std::span<float>) override {}  // every replica holds them
  std::vector<double> exchange_step_times(double mine) override { return comm_.allgather(mine); }
  bool agree_to_stop(bool mine) override {
    return comm_.allreduce(mine ? 1 : 0, mpi::Op::kMax) != 0;
  }

 private:
  static constexpr int kChief = 0;  // replica 0, rank 0 of the replicas' communicator
  const mpi::Comm& comm_;
  Optimizer& optimizer_;
  std::int64_t fusion_bytes_;
  Compression compression_;
  std::vector<float> residual_;       // bf16: what the rounding has not sent yet
  std::vector<std::uint16_t> wire_;   // bf16: one piece as it travels
  std::int64_t bytes_sent_ = 0;
  std::int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Replication> allreduce(Server& server, Optimizer& optimizer,
                                       const ReplicationOptions& options) {
  return std::make_unique<AllreduceReplication>(server, optimizer, options);
}

}  // namespace cohort::modes
