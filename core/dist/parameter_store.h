#pragma once
// Parameters on the ps tasks in one-sided MPI windows.
//
// Every ps task holds the variable parts the ReplicaDeviceSetter placed on it, in memory its
// Server hosts (a window made with MPI_Win_allocate, see Server::host). Workers read them with MPI_Get and add update deltas with
// MPI_Accumulate(MPI_SUM) under shared passive-target locks: the ps process takes no part in a
// transfer, and accumulate's element-wise atomicity means no concurrent update is lost. A small
// int64 window on ps 0 holds the global step and the counters the training modes coordinate with.

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/dist/server.h"
#include "cohort/core/nn/graph.h"
#include "cohort/mpi/window.h"

namespace cohort {

/// Where each range of the flat parameter buffer lives on the ps tasks.
struct StoreLayout {
  struct Segment {
    std::int64_t offset = 0;     ///< first element in the worker's flat buffer
    std::int64_t length = 0;
    int ps = 0;                  ///< ps task index
    std::int64_t ps_offset = 0;  ///< first element in that ps task's window
  };
  std::vector<Segment> segments;       ///< ordered by ps, then offset; adjacent ranges merged
  /// Elements held by each ps task: each part at the same place within a 64-byte line as in the
  /// flat buffer (padding between parts), and the total rounded up to whole lines.
  std::vector<std::int64_t> ps_sizes;

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
  kLearningRateScale = 7,  ///< the chief's factor on the learning rate, as a double's bits (0: 1)
  kApplied = 8,     ///< sync mode: (step << 24) | pieces of that step's update written
  kClearer = 9,     ///< sync mode: (step << 24) | 1 + the worker that zeroes its accumulators
  kWorkerBase = 10,  ///< three blocks of one slot per worker from here (see read_worker_slots)
};

/// The parameters as the computing tasks see them, laid out in the memory the ps tasks host.
///
/// Construction is collective over the computing tasks (Server::host; the ps tasks take part
/// from Server::join()). The memory belongs to the Server, which frees it when every computing
/// task is done (Server::done): the store must not be used after its server's done(). Transfers
/// are blocking (they return when the data has arrived or been applied at the target) and made
/// from the main thread only.
class ParameterStore {
 public:
  struct Options {
    /// Sync mode: a second region per ps task where workers sum their gradients.
    bool gradient_accumulators = false;
  };

  /// Collective over the computing tasks (and, through their join(), the ps tasks). Throws
  /// InvalidArgument when the cluster has no ps task or a variable is not placed on one.
  ParameterStore(Server& server, const Graph& graph, Options options);
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

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
  /// Transfers started now and completed later, for gradients sent while the backward pass
  /// still runs: parameters[first, first + delta.size()) += delta (start_push), or the same
  /// into the gradient accumulators (start_accumulate, sync mode). The lock epochs they open
  /// stay open; the transfers are applied at the ps tasks by complete() or by the next blocking
  /// transfer of values (which comes after them), and `delta` must not change until then.
  void start_push(std::int64_t first, std::span<const float> delta);
  void start_accumulate(std::int64_t first, std::span<const float> grads);
  /// The same with bfloat16 on the wire (bit patterns: half the bytes; --compression=bf16),
  /// where the memory is served and the ps converts as it adds. Error where it is one-sided
  /// (MPI_Accumulate adds float32 only).
  void start_push_bf16(std::int64_t first, std::span<const std::uint16_t> delta);
  void start_accumulate_bf16(std::int64_t first, std::span<const std::uint16_t> grads);
  /// Whether the memory is served by messages (see mpi::Window), as over TCP alone.
  bool served() const { return memory_.values.served(); }
  /// Never blocks: moves the started transfers on where the memory is served (see
  /// mpi::Window::progress). Free where it is one-sided.
  void progress() { memory_.values.progress(); }
  /// Blocking until every started transfer has been applied.
  void complete();
  /// values := the parameters, started now like start_push (and, like it, completed later).
  /// A transfer started after it in the same epoch comes after it: it does not see a push
  /// started later.
  void start_pull(std::span<float> values);
  /// values := the parameters, after the pushes this task has started (in their epochs), while
  /// 1 is added to `count`; returns count's new value. After start_push(delta) this is an async
  /// step in one lock epoch per ps task. Where the memory is one-sided the pushes complete at the
  /// ps before the count moves (a count of N: N updates are in); where it is served, push, pull
  /// and count are in flight together and cost one round trip, so the count may be read a moment
  /// before the update it counts lands. Empty `values`: no pull, the started transfers complete.
  std::int64_t pull_counting(std::span<float> values, ControlSlot count);
  /// parameters := values (initialisation, restore, a sync step's update).
  void assign(std::span<const float> values);
  /// The same for the flat range [first, first + values.size()) alone.
  void assign(std::int64_t first, std::span<const float> values);

  /// Sync mode: sums := the accumulators, once no more gradients can arrive for the step.
  /// Where the memory is served they are zeroed in the same request. Where it is one-sided this
  /// only reads them (an atomic take-and-reset, MPI_Get_accumulate with MPI_REPLACE, costs about
  /// three plain reads there), and clear_gradients() zeroes them, off the other workers' path,
  /// before the next step's gradients may be sent.
  void take_gradients(std::span<float> sums);
  /// Zeroes the accumulators after take_gradients where the memory is one-sided; nothing to do
  /// where it is served.
  void clear_gradients();
  /// The same for the flat range [first, first + count) alone.
  void clear_gradients(std::int64_t first, std::size_t count);
  /// take_gradients for the flat range [first, first + sums.size()) alone.
  void take_gradients(std::int64_t first, std::span<float> sums);
  /// The same with bfloat16 on the wire (bit patterns, half the bytes), where the memory is
  /// served: the accumulators keep what the rounding lost, which joins the next step's sum.
  /// Error where the memory is one-sided.
  void take_gradients_bf16(std::span<std::uint16_t> sums);
  void take_gradients_bf16(std::int64_t first, std::span<std::uint16_t> sums);

  /// One change to a control slot: `value` replaces it (mpi::Op::kReplace) or is added to it
  /// (mpi::Op::kSum). `worker` picks the slot in the worker block, as in read().
  struct SlotUpdate {
    ControlSlot slot;
    std::int64_t value = 0;
    mpi::Op op = mpi::Op::kReplace;
    int worker = 0;
  };

  /// Atomic operations on the control window (each a round trip to ps 0).
  std::int64_t read(ControlSlot slot, int worker = 0);
  /// values[i] := slot first + i (from `worker`'s slot where first is kWorkerBase), each read
  /// atomically, in one round trip.
  void read(ControlSlot first, std::span<std::int64_t> values, int worker = 0);
  /// Applies the updates in the order given, each atomically: a task that sees one's effect sees
  /// the earlier ones' too (a value, then the flag that publishes it). Blocking until all are
  /// applied; one round trip where the memory is served, one per update where it is one-sided.
  void update(std::initializer_list<SlotUpdate> updates);
  void write(ControlSlot slot, std::int64_t value, int worker = 0) { exchange(slot, value, worker); }
  /// Replaces the slot's value and returns the previous one.
  std::int64_t exchange(ControlSlot slot, std::int64_t value, int worker = 0);
  std::int64_t fetch_add(ControlSlot slot, std::int64_t value, int worker = 0);
  /// Replaces the slot with `desired` if it holds `expected`; returns what it held.
  std::int64_t compare_and_swap(ControlSlot slot, std::int64_t expected, std::int64_t desired);
  /// Every worker's slot of block `block` (0: clocks and sync progress, 1: step times, 2: sync
  /// mode's gradient pieces added), in worker order. Slot (block b, worker w) is
  /// ControlSlot::kWorkerBase with worker = b * workers + w.
  std::vector<std::int64_t> read_worker_slots(int block = 0);

  /// Ends this task's use of the store: later transfers throw Error. Not collective; the memory
  /// itself is freed by the server's done().
  void close() { closed_ = true; }

 private:
  // One transfer between `values` and region `region` (0 parameters, 1 accumulators): kGet
  // reads, kTake reads and zeroes, kPut writes, kAdd accumulates; kAddBf16 accumulates `wire`,
  // kTakeBf16 takes into `wire` (Window::take_bf16); kZero zeroes `zeros` elements.
  enum class Move { kGet, kTake, kPut, kAdd, kAddBf16, kTakeBf16, kZero };
  struct Part {
    Move move;
    std::int64_t region;
    std::span<float> values;
    std::span<std::uint16_t> wire = {};
    std::size_t zeros = 0;
    bool bf16() const { return move == Move::kAddBf16 || move == Move::kTakeBf16; }
    std::size_t size() const {
      return move == Move::kZero ? zeros : bf16() ? wire.size() : values.size();
    }
  };
  // The parts, in order, over the flat range [first, first + size) (every part's size), in one
  // lock epoch per ps task the range touches, after the started transfers (in the epochs they
  // left open). `started`: the epochs stay open (complete() ends them), else every epoch ends.
  void transfer(std::int64_t first, std::initializer_list<Part> parts, bool started = false);
  // The same over all the parameters (one part).
  void transfer(std::span<const float> all, const Part& part) {
    check_size(all.size());
    transfer(0, {part});
  }
  // MPI only reads what is written or added; Part's span is non-const for the other moves.
  template <typename T>
  static std::span<T> writable(std::span<const T> s) {
    return {const_cast<T*>(s.data()), s.size()};
  }
  void check_size(std::size_t n) const;
  int ps_rank(int ps) const { return memory_.ps_ranks[static_cast<std::size_t>(ps)]; }
  std::size_t slot_offset(ControlSlot slot, int worker) const;
  void check_open() const;

  StoreLayout layout_;
  std::int64_t num_parameters_ = 0;
  bool accumulators_ = false;
  int num_workers_ = 0;
  HostedMemory memory_;  // values: [parameters | gradient accumulators] on each ps task
  std::vector<mpi::Window<float>::LockGuard> epochs_;  // per ps task, left open by start_*()
  // Per ps task: whether its open epoch holds adds alone, which need no order among themselves
  // (element-wise atomic sums).
  std::vector<char> only_adds_;
  int control_rank_ = 0;  // window rank of ps 0, which holds the control slots
  bool closed_ = false;
};

}  // namespace cohort
