#pragma once
// Parameters on the ps tasks in one-sided MPI windows.
//
// Every ps task holds the variable parts the ReplicaDeviceSetter placed on it, in a window made
// with MPI_Win_allocate. Workers read them with MPI_Get and add update deltas with
// MPI_Accumulate(MPI_SUM) under shared passive-target locks: the ps process takes no part in a
// transfer, and accumulate's element-wise atomicity means no concurrent update is lost. A small
// int64 window on ps 0 holds the global step and the counters the training modes coordinate with.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/dist/cluster.h"
#include "cohort/core/nn/graph.h"
#include "cohort/mpi/window.h"

namespace cohort {

class Server;

/// Where each range of the flat parameter buffer lives on the ps tasks.
struct StoreLayout {
  struct Segment {
    std::int64_t offset = 0;     ///< first element in the worker's flat buffer
    std::int64_t length = 0;
    int ps = 0;                  ///< ps task index
    std::int64_t ps_offset = 0;  ///< first element in that ps task's window
  };
  std::vector<Segment> segments;       ///< ordered by ps, then offset; adjacent ranges merged
  std::vector<std::int64_t> ps_sizes;  ///< elements held by each ps task

  /// Collects the graph's variable parts by ps task. Variables the setter left on the worker are
  /// an InvalidArgument: with ps tasks, every variable lives on one.
  static StoreLayout from_graph(const Graph& graph, int ps_tasks);
};

/// Counters in the control window on ps 0 (int64 slots).
enum class ControlSlot : int {
  kGlobalStep = 0,  ///< steps applied so far
  kReady = 1,       ///< 1 once the chief has initialised or restored the parameters
  kSyncWord = 2,    ///< sync mode: (step << 24) | gradients claimed for that step
  kCompleted = 3,   ///< sync mode: claimed gradients fully accumulated for the current step
  kDropped = 4,     ///< sync mode: stale or surplus gradients dropped
  kRetired = 5,     ///< workers that have left training
  kStopped = 6,     ///< 1 once the chief has stopped training
  kWorkerBase = 8,  ///< two blocks of one slot per worker from here (see read_worker_slots)
};

/// The worker side of the parameter store, and (through serve()) the ps side.
///
/// Construction is collective over every worker and ps task: workers construct it with the graph;
/// the ps tasks take part from Server::join(), told their shard sizes by the chief. Transfers are
/// blocking (they return when the data has arrived or been applied at the target) and made from
/// the main thread only. The store must be closed (close() or the destructor) by every worker;
/// that is collective too, and ps tasks return from join() only after it.
class ParameterStore {
 public:
  struct Options {
    /// Sync mode: a second region per ps task where workers sum their gradients.
    bool gradient_accumulators = false;
  };

  /// Workers: collective over the cluster's workers and ps tasks.
  ParameterStore(Server& server, const Graph& graph, Options options);
  ~ParameterStore();
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  /// ps side: called by Server::join() with the chief's header; collective with the workers'
  /// constructor. The returned store lives until every worker is done.
  static std::unique_ptr<ParameterStore> serve(const ClusterSpec& cluster,
                                               std::span<const std::int64_t> header);

  const StoreLayout& layout() const { return layout_; }
  std::int64_t num_parameters() const { return num_parameters_; }

  /// values := the parameters on the ps tasks.
  void pull(std::span<float> values);
  /// parameters += delta, atomically per element (MPI_Accumulate SUM).
  void push(std::span<const float> delta);
  /// The same for the flat range [first, first + values.size()) alone, e.g. one variable's
  /// (Variable::offset, Variable::size).
  void pull(std::int64_t first, std::span<float> values);
  void push(std::int64_t first, std::span<const float> delta);
  /// parameters := values (initialisation, restore, a sync step's update).
  void assign(std::span<const float> values);

  /// Sync mode: gradient accumulators += grads; read them; zero them.
  void accumulate_gradients(std::span<const float> grads);
  void read_gradients(std::span<float> sums);
  void zero_gradients();

  /// Atomic operations on the control window (each a round trip to ps 0).
  std::int64_t read(ControlSlot slot, int worker = 0);
  void write(ControlSlot slot, std::int64_t value, int worker = 0) { exchange(slot, value, worker); }
  /// Replaces the slot's value and returns the previous one.
  std::int64_t exchange(ControlSlot slot, std::int64_t value, int worker = 0);
  std::int64_t fetch_add(ControlSlot slot, std::int64_t value, int worker = 0);
  /// Replaces the slot with `desired` if it holds `expected`; returns what it held.
  std::int64_t compare_and_swap(ControlSlot slot, std::int64_t expected, std::int64_t desired);
  /// Every worker's slot of block `block` (0: clocks and sync progress, 1: step times), in worker
  /// order. Slot (block b, worker w) is ControlSlot::kWorkerBase with worker = b * workers + w.
  std::vector<std::int64_t> read_worker_slots(int block = 0);

  /// Collective over workers and ps tasks: tells the ps tasks this worker is done (through the
  /// server) and frees the windows once everyone has. Called by the destructor if needed.
  void close();

 private:
  ParameterStore(const ClusterSpec& cluster, std::int64_t local_size, std::int64_t control_size,
                 bool accumulators);
  void transfer(std::int64_t first, std::span<float> values, bool get, std::int64_t region, mpi::Op op);
  void transfer(std::span<float> values, bool get, std::int64_t region, mpi::Op op) {
    check_size(values.size());
    transfer(0, values, get, region, op);
  }
  void check_size(std::size_t n) const;
  int ps_rank(int ps) const { return ps_ranks_[static_cast<std::size_t>(ps)]; }
  std::size_t slot_offset(ControlSlot slot, int worker) const;

  Server* server_ = nullptr;  // null on the ps side
  StoreLayout layout_;
  std::int64_t num_parameters_ = 0;
  bool accumulators_ = false;
  std::vector<int> ps_ranks_;
  int control_rank_ = 0;      // world rank of ps 0
  int num_workers_ = 0;
  mpi::Window<float> params_;  // [parameters | gradient accumulators] on each ps task
  mpi::Window<std::int64_t> control_;
  std::vector<float> zeros_;
  bool closed_ = false;
};

}  // namespace cohort
