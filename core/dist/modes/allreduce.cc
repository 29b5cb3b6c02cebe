// --mode=allreduce: Horovod's scheme on MPI. Every replica sums the gradients with in-place
// MPI_Allreduce in fused pieces, averages and applies the same update, so the parameters stay
// identical without any ps. With --compression=bf16 the pieces travel as bfloat16, with error
// feedback (fusion.h); every replica still gets the same sum, so they stay identical.
//
// On float32 gradients without buckets, the ranks of a node sum them in the memory they share
// and MPI_Allreduce sums across the nodes (node_sum.h); the trainer computes them in that memory.
//
// With --bucket_bytes the gradients leave during the backward pass (core/dist/buckets.h): each
// bucket's non-blocking MPI_Iallreduce starts as soon as the backward pass reports it final.
// Every replica runs the same layers in the same order, so all start the same buckets in the
// same order. The backward pass tests the open requests between layers, which is what moves
// them on (Open MPI progresses non-blocking collectives inside MPI calls only); after_step()
// waits for the rest.
//
// Each replica posts its step on its node's ReplicaBoard (replica_board.h), so that one whose
// own loop ended early and one that went on learn it, however the sums wait.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/base/bfloat16.h"
#include "cohort/core/base/stall_watch.h"
#include "cohort/core/dist/buckets.h"
#include "cohort/core/dist/fusion.h"
#include "cohort/core/dist/modes/modes.h"
#include "cohort/core/dist/node_sum.h"
#include "cohort/core/dist/replica_board.h"
#include "cohort/mpi/environment.h"

namespace cohort::modes {
namespace {

class AllreduceReplication final : public Replication, private GradientListener {
 public:
  // Collective over the replicas (NodeSum::make).
  AllreduceReplication(Server& server, std::int64_t parameters, Optimizer& optimizer,
                       const ReplicationOptions& options)
      : server_(server),
        comm_(server.replicas()),
        optimizer_(optimizer),
        fusion_bytes_(options.fusion_bytes),
        bucket_bytes_(options.bucket_bytes),
        compression_(options.compression) {
    if (options.shared_memory_sums && bucket_bytes_ <= 0 && !bf16())
      node_sum_ = NodeSum::make(comm_, static_cast<std::size_t>(parameters));
    board_ = ReplicaBoard::make(comm_);
  }
  void start(std::span<float> values, std::int64_t initial_step,
             std::optional<std::chrono::milliseconds>) override {
    // Everyone starts from the chief's parameters and optimizer state (restored there alone),
    // and so applies the same updates.
    comm_.bcast(values, kChief);
    share_optimizer_state(comm_, optimizer_, values.size());
    abandoned_ = false;
    // Before the last collective step of the start: no replica is past it before all are back.
    if (board_) board_->rejoin();
    step_ = comm_.allreduce(initial_step, mpi::Op::kMax);
    // Every replica is past its last finish() (this allreduce holds them all).
    if (node_sum_) node_sum_->rejoin();
    if (board_) {
      board_->at_step(step_);
      // A sum blocked inside MPI cannot look at the board: the stall watch's thread does.
      peer_check_.emplace([this] {
        const ReplicaBoard::Parting parting = board_->parting();
        return parting.ranks.empty() ? std::string() : parted(parting);
      });
    }
  }
  void before_step(std::span<float>) override {
    if (board_) board_->at_step(step_ + 1);
  }
  std::span<float> gradient_memory() override {
    return node_sum_ ? node_sum_->input() : std::span<float>();
  }
  GradientListener* gradient_listener(std::span<float> grads) override {
    if (bucket_bytes_ <= 0) return nullptr;
    open_buckets(grads);
    return this;
  }
  StepOutcome after_step(std::span<float> grads, std::span<float> values) override {
    std::span<const float> sum = grads;
    if (node_sum_) {
      const std::span<float> input = node_sum_->input();
      if (grads.data() != input.data()) std::copy(grads.begin(), grads.end(), input.begin());
      try {
        sum = node_sum_->sum(fusion_bytes_);
      } catch (const NodeSum::Parted& e) {
        abandoned_ = true;
        throw Error(parted({e.ranks, step_, step_ + 1, false}));
      }
      bytes_sent_ += static_cast<std::int64_t>(grads.size_bytes());
    } else if (bucket_bytes_ > 0) {
      // Without a listener this step (a GPU tower), every bucket starts here.
      if (!open_ || grads.data() != grads_.data() || grads.size() != grads_.size())
        open_buckets(grads);
      finish_buckets();
    } else if (compression_ == Compression::kBf16) {
      if (residual_.size() != grads.size()) residual_.assign(grads.size(), 0.0f);
      bytes_sent_ += allreduce_fused_bf16(comm_, grads, residual_, wire_, fusion_bytes_);
    } else {
      allreduce_fused(comm_, grads, fusion_bytes_);
      bytes_sent_ += static_cast<std::int64_t>(grads.size_bytes());
    }
    // The mean of the replicas' gradients: the optimizer scales the sum as it reads it.
    optimizer_.apply(values, sum, step_, 1.0f / static_cast<float>(comm_.size()));
    return {++step_, true, false};
  }
  std::int64_t global_step() const override { return step_; }
  std::int64_t gradient_bytes_sent() const override { return bytes_sent_; }
  std::string stats() const override {
    std::string text = std::string("gradients on the wire as ") +
                       (bf16() ? "bfloat16" : "float32") + ": " + std::to_string(bytes_sent_) +
                       " bytes";
    if (node_sum_) text += ", summed in each node's shared memory";
    if (bucket_bytes_ > 0)
      text += ", " + std::to_string(during_backward_) + " of " + std::to_string(sent_) +
              " buckets sent during the backward pass";
    return text;
  }
  ~AllreduceReplication() override {
    peer_check_.reset();
    // Left after an error: the peers may never join the window's free or the open requests.
    if (!abandoned_) return;
    mpi::Environment::note_left_behind("allreduce mode's shared buffers and collectives, left "
                                       "after an error in the session");
    if (node_sum_) node_sum_->abandon();
    if (board_) board_->abandon();
    for (mpi::Request& request : requests_) request.abandon();
  }
  // A replica whose training ends while the others run on (a loop of the program's own that
  // stopped on one replica) would leave them waiting in their next sum for good. Where replicas
  // share a node's memory, the two sides learn it there and both fail instead: the leaver here,
  // waiting for its node's others to leave too; one that went on in its sum (NodeSum's, or
  // through the board and the stall watch's thread where the sum waits inside MPI).
  void finish() override {
    // This thread looks at the board itself from here: an error it throws may be caught.
    peer_check_.reset();
    if (board_) board_->leave(step_);
    try {
      const StallWatch watch("the end of training, with the other workers of this node", step_);
      if (node_sum_) node_sum_->leave();
      while (board_) {
        const ReplicaBoard::Parting parting = board_->parting();
        if (!parting.ranks.empty()) throw Error(parted(parting));
        if (board_->all_left()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (const NodeSum::Parted& e) {
      abandon();
      throw Error(parted({e.ranks, step_, step_ + 1, true}));
    } catch (...) {
      abandon();
      throw;
    }
  }
  // Nothing collective from here on unless a new start() (collective: every replica is back)
  // takes training up again, as a program that caught an error every rank hit alike may.
  void abandon() override {
    abandoned_ = true;
    peer_check_.reset();
  }
  void fetch_parameters(std::span<float>) override {}  // every replica holds them
  std::vector<double> exchange_step_times(double mine) override { return comm_.allgather(mine); }
  // An offer until the next agree_to_stop: a replica that changed rate alone would apply
  // updates no other replica applies.
  void set_learning_rate_scale(double scale) override { offered_scale_ = scale; }
  // One reduction for both: the stop wish of any replica, and the chief's learning-rate scale
  // (the others offer 0).
  bool agree_to_stop(bool mine) override {
    std::array<double, 2> agreed = {mine ? 1.0 : 0.0, comm_.rank() == kChief ? offered_scale_ : 0.0};
    comm_.allreduce(std::span<double>(agreed), mpi::Op::kMax);
    learning_rate_scale_ = agreed[1];
    return agreed[0] != 0;
  }

 private:
  static constexpr int kChief = 0;  // replica 0, rank 0 of the replicas' communicator

  bool bf16() const { return compression_ == Compression::kBf16; }

  std::string replicas(const std::vector<int>& ranks) const {
    std::string names;
    for (const int replica : ranks)
      names += (names.empty() ? "" : ", ") + server_.replica_task(replica).to_string() + " (rank " +
               std::to_string(server_.replica_rank(replica)) + ")";
    return names;
  }
  // The error of a replica whose training and another's part: the leaver's, or the other's.
  std::string parted(const ReplicaBoard::Parting& p) const {
    const std::string what =
        p.this_rank_left
            ? "this replica ended training at global step " + std::to_string(p.left_at) + ", but " +
                  replicas(p.ranks) + " went on to step " + std::to_string(p.went_on_to)
            : "this replica went on to global step " + std::to_string(p.went_on_to) + ", but " +
                  replicas(p.ranks) + " ended training at step " + std::to_string(p.left_at);
    return what + ": every replica must run the same steps; let the session stop them together "
                  "(should_stop(); TrainerOptions::epochs for uneven data)";
  }

  void open_buckets(std::span<float> grads) {
    grads_ = grads;
    buckets_ = Buckets(static_cast<std::int64_t>(grads.size()),
                       bucket_bytes_ / wire_bytes(compression_));
    requests_.resize(buckets_.count());
    open_ = true;
    if (bf16()) {
      if (residual_.size() != grads.size()) residual_.assign(grads.size(), 0.0f);
      wire_.resize(grads.size());
    }
  }

  // GradientListener, during the backward pass: start every bucket now final, and move the open
  // ones on.
  void ready(std::int64_t from) override {
    const auto started = buckets_.start_final(from, [&](std::size_t k) { start(k); });
    during_backward_ += static_cast<std::int64_t>(started);
    for (std::size_t k = 0; k < buckets_.started(); ++k) requests_[k].test();
  }

  void start(std::size_t k) {
    ++sent_;
    const auto first = static_cast<std::size_t>(buckets_.begin(k));
    const auto n = static_cast<std::size_t>(buckets_.size(k));
    if (bf16()) {
      const std::span<std::uint16_t> wire(wire_.data() + first, n);
      round_with_feedback(grads_.subspan(first, n), std::span<float>(residual_).subspan(first, n),
                          wire);
      requests_[k] = comm_.iallreduce_bf16(wire);
      bytes_sent_ += static_cast<std::int64_t>(wire.size_bytes());
    } else {
      requests_[k] = comm_.iallreduce(grads_.subspan(first, n));
      bytes_sent_ += static_cast<std::int64_t>(n * sizeof(float));
    }
  }

  void finish_buckets() {
    buckets_.start_rest([&](std::size_t k) { start(k); });
    for (std::size_t k = 0; k < requests_.size(); ++k) {
      requests_[k].wait();
      if (bf16()) {
        const auto first = static_cast<std::size_t>(buckets_.begin(k));
        const auto n = static_cast<std::size_t>(buckets_.size(k));
        bf16::to_float(std::span<const std::uint16_t>(wire_.data() + first, n),
                       grads_.subspan(first, n));
      }
    }
    open_ = false;
  }

  const Server& server_;
  const mpi::Comm& comm_;
  Optimizer& optimizer_;
  std::int64_t fusion_bytes_;
  std::int64_t bucket_bytes_;
  Compression compression_;
  std::unique_ptr<NodeSum> node_sum_;  // null: MPI_Allreduce alone
  std::unique_ptr<ReplicaBoard> board_;  // null: no node holds two replicas
  std::optional<StallWatch::PeerCheck> peer_check_;  // the board, from start() to finish()
  std::vector<float> residual_;       // bf16: what the rounding has not sent yet
  std::vector<std::uint16_t> wire_;   // bf16: the pieces as they travel
  std::int64_t bytes_sent_ = 0;
  std::int64_t step_ = 0;
  // --bucket_bytes: this step's buffer, its buckets, one request per bucket.
  std::span<float> grads_;
  Buckets buckets_;
  std::vector<mpi::Request> requests_;
  bool open_ = false;
  std::int64_t sent_ = 0, during_backward_ = 0;  // buckets, for stats()
  bool abandoned_ = false;                        // abandon() since the last start()
  double offered_scale_ = 1.0;                    // the chief's, agreed at the next agree_to_stop
};

}  // namespace

std::unique_ptr<Replication> allreduce(Server& server, const Graph& graph, Optimizer& optimizer,
                                       const ReplicationOptions& options) {
  return std::make_unique<AllreduceReplication>(server, graph.num_parameters(), optimizer,
                                                options);
}

}  // namespace cohort::modes
