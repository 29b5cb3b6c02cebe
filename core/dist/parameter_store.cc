#include "cohort/core/dist/parameter_store.h"

#include <algorithm>
#include <exception>

#include "cohort/core/base/error.h"
#include "cohort/core/base/wait.h"
#include "cohort/core/dist/server.h"

namespace cohort {
namespace {

constexpr std::int64_t kHeaderMagic = 0x436f68727453ll;  // identifies a store header
constexpr std::size_t kHeaderSize = 4;  // magic, local size, control size, accumulators

// Chief: tells every non-computing task its share of the windows, before the collective window
// creation (the ps tasks wait for this in Server::join()). Returns the cluster for the delegated
// constructor.
const ClusterSpec& announce(Server& server, const Graph& graph, bool accumulators) {
  const ClusterSpec& cluster = server.cluster();
  const int ps_tasks = cluster.num_tasks("ps");
  if (ps_tasks == 0)
    throw InvalidArgument("this mode keeps parameters on ps tasks, and the cluster has none: "
                          "pass --ps_tasks=N (or use --mode=allreduce)");
  if (!server.is_chief()) return cluster;
  const StoreLayout layout = StoreLayout::from_graph(graph, ps_tasks);
  for (int rank = 0; rank < cluster.size(); ++rank) {
    const TaskId& task = cluster.task_of(rank);
    if (task.job == "worker" || task.job == "chief") continue;
    const bool holds = task.job == "ps";
    std::int64_t size = holds ? layout.ps_sizes[static_cast<std::size_t>(task.index)] : 0;
    if (accumulators) size *= 2;
    const std::int64_t control =
        holds && task.index == 0
            ? static_cast<std::int64_t>(ControlSlot::kWorkerBase) + 2 * cluster.num_tasks("worker")
            : 0;
    server.send_store_header(rank, {kHeaderMagic, size, control, accumulators ? 1 : 0});
  }
  return cluster;
}

}  // namespace

StoreLayout StoreLayout::from_graph(const Graph& graph, int ps_tasks) {
  if (ps_tasks <= 0) throw InvalidArgument("parameter store: needs at least one ps task");
  StoreLayout layout;
  layout.ps_sizes.assign(static_cast<std::size_t>(ps_tasks), 0);
  for (const Variable& v : graph.variables()) {
    if (!v.placement.on_ps())
      throw InvalidArgument("parameter store: variable " + v.name +
                            " is not placed on a ps task (build the graph with a "
                            "ReplicaDeviceSetter over the ps tasks)");
    for (const auto& part : v.placement.parts) {
      if (part.ps_task < 0 || part.ps_task >= ps_tasks)
        throw InvalidArgument("parameter store: variable " + v.name + " placed on ps task " +
                              std::to_string(part.ps_task) + " of " + std::to_string(ps_tasks));
      auto& size = layout.ps_sizes[static_cast<std::size_t>(part.ps_task)];
      layout.segments.push_back({v.offset + part.begin, part.end - part.begin, part.ps_task, size});
      size += part.end - part.begin;
    }
  }
  std::stable_sort(layout.segments.begin(), layout.segments.end(),
                   [](const Segment& a, const Segment& b) { return a.ps < b.ps; });
  // Ranges contiguous on both sides become one transfer (all of them, with a single ps task).
  std::vector<Segment> merged;
  for (const Segment& s : layout.segments) {
    if (!merged.empty()) {
      Segment& last = merged.back();
      if (last.ps == s.ps && last.offset + last.length == s.offset &&
          last.ps_offset + last.length == s.ps_offset) {
        last.length += s.length;
        continue;
      }
    }
    merged.push_back(s);
  }
  layout.segments = std::move(merged);
  return layout;
}

ParameterStore::ParameterStore(const ClusterSpec& cluster, std::int64_t local_size,
                               std::int64_t control_size, bool accumulators)
    : accumulators_(accumulators),
      ps_ranks_(cluster.ranks_of("ps")),
      control_rank_(ps_ranks_.empty() ? 0 : ps_ranks_.front()),
      num_workers_(cluster.num_tasks("worker")),
      params_(cluster.world(), static_cast<std::size_t>(local_size)),
      control_(cluster.world(), static_cast<std::size_t>(control_size)) {}

ParameterStore::ParameterStore(Server& server, const Graph& graph, Options options)
    : ParameterStore(announce(server, graph, options.gradient_accumulators), 0, 0,
                     options.gradient_accumulators) {
  server_ = &server;
  layout_ = StoreLayout::from_graph(graph, static_cast<int>(ps_ranks_.size()));
  num_parameters_ = graph.num_parameters();
}

std::unique_ptr<ParameterStore> ParameterStore::serve(const ClusterSpec& cluster,
                                                      std::span<const std::int64_t> header) {
  if (header.size() != kHeaderSize || header[0] != kHeaderMagic)
    throw Error("parameter store: malformed header from the chief");
  return std::unique_ptr<ParameterStore>(
      new ParameterStore(cluster, header[1], header[2], header[3] != 0));
}

ParameterStore::~ParameterStore() {
  // Closing is collective: never while an error unwinds (app::Run is about to end the job).
  if (std::uncaught_exceptions() > 0) return;
  try {
    close();
  } catch (...) {
    // Destructors do not throw. A store that cannot close leaves the ps to its join() timeout.
  }
}

void ParameterStore::close() {
  if (closed_) return;
  closed_ = true;
  if (server_) server_->done();
  // Every rank arrives here at its own time; a sleeping barrier keeps early ones off the CPU
  // before the windows are freed (MPI_Win_free is collective and would spin).
  mpi::Request barrier = params_.comm().ibarrier();
  wait_until([&] { return barrier.test().has_value() || !barrier.active(); },
             std::chrono::milliseconds::zero(), [] { return std::string("the other tasks"); });
  control_ = mpi::Window<std::int64_t>();
  params_ = mpi::Window<float>();
}

void ParameterStore::check_size(std::size_t n) const {
  if (static_cast<std::int64_t>(n) != num_parameters_)
    throw InvalidArgument("parameter store: " + std::to_string(n) + " values for " +
                          std::to_string(num_parameters_) + " parameters");
}

void ParameterStore::transfer(std::int64_t first, std::span<float> values, bool get,
                              std::int64_t region, mpi::Op op) {
  const std::int64_t last = first + static_cast<std::int64_t>(values.size());
  if (first < 0 || last > num_parameters_)
    throw InvalidArgument("parameter store: range [" + std::to_string(first) + ", " +
                          std::to_string(last) + ") outside the " + std::to_string(num_parameters_) +
                          " parameters");
  // One lock epoch per ps task, every (clipped) segment of that task inside it.
  std::size_t i = 0;
  while (i < layout_.segments.size()) {
    const int ps = layout_.segments[i].ps;
    const int rank = ps_rank(ps);
    const std::int64_t base = region * layout_.ps_sizes[static_cast<std::size_t>(ps)];
    mpi::Window<float>::LockGuard lock;
    for (; i < layout_.segments.size() && layout_.segments[i].ps == ps; ++i) {
      const auto& s = layout_.segments[i];
      const std::int64_t begin = std::max(first, s.offset);
      const std::int64_t end = std::min(last, s.offset + s.length);
      if (begin >= end) continue;
      if (!lock.locked()) lock = params_.lock(rank, mpi::LockType::kShared);
      const auto span = values.subspan(static_cast<std::size_t>(begin - first),
                                       static_cast<std::size_t>(end - begin));
      const auto at = static_cast<std::size_t>(base + s.ps_offset + (begin - s.offset));
      if (get) params_.get(span, rank, at);
      else if (op == mpi::Op::kReplace) params_.put(span, rank, at);
      else params_.accumulate(span, rank, at, op);
    }
    lock.unlock();
  }
}

void ParameterStore::pull(std::span<float> values) { transfer(values, true, 0, mpi::Op::kNoOp); }

void ParameterStore::pull(std::int64_t first, std::span<float> values) {
  transfer(first, values, true, 0, mpi::Op::kNoOp);
}

void ParameterStore::push(std::int64_t first, std::span<const float> delta) {
  transfer(first, {const_cast<float*>(delta.data()), delta.size()}, false, 0, mpi::Op::kSum);
}

void ParameterStore::push(std::span<const float> delta) {
  // MPI reads from the buffer only; the span is non-const for the shared transfer routine.
  transfer({const_cast<float*>(delta.data()), delta.size()}, false, 0, mpi::Op::kSum);
}

void ParameterStore::assign(std::span<const float> values) {
  transfer({const_cast<float*>(values.data()), values.size()}, false, 0, mpi::Op::kReplace);
}

void ParameterStore::accumulate_gradients(std::span<const float> grads) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer({const_cast<float*>(grads.data()), grads.size()}, false, 1, mpi::Op::kSum);
}

void ParameterStore::read_gradients(std::span<float> sums) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer(sums, true, 1, mpi::Op::kNoOp);
}

void ParameterStore::zero_gradients() {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  zeros_.assign(static_cast<std::size_t>(num_parameters_), 0.0f);
  transfer(zeros_, false, 1, mpi::Op::kReplace);
}

std::size_t ParameterStore::slot_offset(ControlSlot slot, int worker) const {
  std::size_t offset = static_cast<std::size_t>(slot);
  if (slot == ControlSlot::kWorkerBase) {
    if (worker < 0 || worker >= 2 * num_workers_)
      throw InvalidArgument("parameter store: no worker " + std::to_string(worker));
    offset += static_cast<std::size_t>(worker);
  }
  return offset;
}

std::int64_t ParameterStore::read(ControlSlot slot, int worker) {
  auto lock = control_.lock(control_rank_, mpi::LockType::kShared);
  return control_.fetch_and_op(0, control_rank_, slot_offset(slot, worker), mpi::Op::kNoOp);
}

std::int64_t ParameterStore::exchange(ControlSlot slot, std::int64_t value, int worker) {
  auto lock = control_.lock(control_rank_, mpi::LockType::kShared);
  return control_.fetch_and_op(value, control_rank_, slot_offset(slot, worker), mpi::Op::kReplace);
}

std::int64_t ParameterStore::fetch_add(ControlSlot slot, std::int64_t value, int worker) {
  auto lock = control_.lock(control_rank_, mpi::LockType::kShared);
  return control_.fetch_and_op(value, control_rank_, slot_offset(slot, worker), mpi::Op::kSum);
}

std::int64_t ParameterStore::compare_and_swap(ControlSlot slot, std::int64_t expected,
                                              std::int64_t desired) {
  // An exclusive epoch makes the read and the write one atomic step. (MPI_Compare_and_swap on
  // 8-byte integers crashes Open MPI 4's shared-memory transport; see mpi/window.h.)
  auto lock = control_.lock(control_rank_, mpi::LockType::kExclusive);
  const std::size_t offset = slot_offset(slot, 0);
  const std::int64_t seen = control_.fetch_and_op(0, control_rank_, offset, mpi::Op::kNoOp);
  if (seen == expected) control_.fetch_and_op(desired, control_rank_, offset, mpi::Op::kReplace);
  return seen;
}

std::vector<std::int64_t> ParameterStore::read_worker_slots(int block) {
  if (block < 0 || block > 1) throw InvalidArgument("parameter store: no slot block " + std::to_string(block));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(num_workers_));
  auto lock = control_.lock(control_rank_, mpi::LockType::kShared);
  // MPI_Get_accumulate with NO_OP: an atomic read against concurrent fetch-and-ops on the slots.
  control_.get_atomic(slots, control_rank_,
                      static_cast<std::size_t>(ControlSlot::kWorkerBase) +
                          static_cast<std::size_t>(block * num_workers_));
  lock.unlock();
  return slots;
}

}  // namespace cohort
