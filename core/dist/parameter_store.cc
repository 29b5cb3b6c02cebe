#include "cohort/core/dist/parameter_store.h"

#include <algorithm>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

StoreLayout layout_for(const Server& server, const Graph& graph) {
  const int ps_tasks = server.cluster().num_tasks("ps");
  if (ps_tasks == 0)
    throw InvalidArgument("this mode keeps parameters on ps tasks, and the cluster has none: "
                          "pass --ps_tasks=N (or choose the allreduce mode)");
  return StoreLayout::from_graph(graph, ps_tasks);
}

// Each ps task's share of the parameters (twice that with accumulators); ps 0 also holds the
// control slots, three blocks of one per replica.
HostedMemory host(Server& server, const StoreLayout& layout, bool accumulators) {
  std::vector<std::int64_t> values = layout.ps_sizes;
  if (accumulators)
    for (std::int64_t& v : values) v *= 2;
  std::vector<std::int64_t> counters(values.size(), 0);
  counters.front() =
      static_cast<std::int64_t>(ControlSlot::kWorkerBase) + 3 * server.num_replicas();
  return server.host(values, counters);
}

}  // namespace

StoreLayout StoreLayout::from_graph(const Graph& graph, int ps_tasks) {
  constexpr std::int64_t kLine = mpi::Window<float>::kAlignment / sizeof(float);
  if (ps_tasks <= 0) throw InvalidArgument("parameter store: needs at least one ps task");
  StoreLayout layout;
  layout.ps_sizes.assign(static_cast<std::size_t>(ps_tasks), 0);
  for (const Variable& v : graph.variables()) {
    if (!v.trainable) continue;  // state stays with each replica
    if (!v.placement.on_ps())
      throw InvalidArgument("parameter store: variable " + v.name +
                            " is not placed on a ps task (build the graph with a "
                            "ReplicaDeviceSetter over the ps tasks)");
    for (const auto& part : v.placement.parts) {
      if (part.ps_task < 0 || part.ps_task >= ps_tasks)
        throw InvalidArgument("parameter store: variable " + v.name + " placed on ps task " +
                              std::to_string(part.ps_task) + " of " + std::to_string(ps_tasks));
      auto& size = layout.ps_sizes[static_cast<std::size_t>(part.ps_task)];
      // A part starts at the same place within a 64-byte line on the ps as in the flat buffer
      // (windows and tensors start on such lines), so that copies between them stay aligned
      // alike; this wastes at most 15 floats per part.
      const std::int64_t flat = v.offset + part.begin;
      size += ((flat - size) % kLine + kLine) % kLine;
      layout.segments.push_back({flat, part.end - part.begin, part.ps_task, size});
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
  // Whole lines, so that a second region (sync mode's accumulators) keeps the same places.
  for (std::int64_t& size : layout.ps_sizes) size = (size + kLine - 1) / kLine * kLine;
  return layout;
}

ParameterStore::ParameterStore(Server& server, const Graph& graph, Options options)
    : layout_(layout_for(server, graph)),
      num_parameters_(graph.num_parameters()),
      accumulators_(options.gradient_accumulators),
      num_workers_(server.num_replicas()),
      memory_(host(server, layout_, accumulators_)),
      epochs_(layout_.ps_sizes.size()),
      only_adds_(layout_.ps_sizes.size(), 1),
      control_rank_(memory_.ps_ranks.front()) {}

void ParameterStore::check_open() const {
  if (closed_) throw Error("parameter store: used after close()");
}

void ParameterStore::check_size(std::size_t n) const {
  if (static_cast<std::int64_t>(n) != num_parameters_)
    throw InvalidArgument("parameter store: " + std::to_string(n) + " values for " +
                          std::to_string(num_parameters_) + " parameters");
}

void ParameterStore::transfer(std::int64_t first, std::initializer_list<Part> parts,
                              bool started) {
  check_open();
  const std::int64_t last = first + static_cast<std::int64_t>(parts.begin()->size());
  if (first < 0 || last > num_parameters_)
    throw InvalidArgument("parameter store: range [" + std::to_string(first) + ", " +
                          std::to_string(last) + ") outside the " + std::to_string(num_parameters_) +
                          " parameters");
  // One lock epoch per ps task: every (clipped) segment of that task, part after part.
  for (std::size_t i = 0; i < layout_.segments.size();) {
    const int ps = layout_.segments[i].ps;
    const int rank = ps_rank(ps);
    std::size_t end_of_task = i;
    while (end_of_task < layout_.segments.size() && layout_.segments[end_of_task].ps == ps)
      ++end_of_task;
    auto& lock = epochs_[static_cast<std::size_t>(ps)];
    char& only_adds = only_adds_[static_cast<std::size_t>(ps)];
    for (const Part& part : parts) {
      const std::int64_t base = part.region * layout_.ps_sizes[static_cast<std::size_t>(ps)];
      // After the transfers already in this epoch (an earlier part's, or started ones), unless
      // adds follow adds: sums need no order, and pieces pushed during the backward pass must
      // not wait for each other.
      const bool add = part.move == Move::kAdd || part.move == Move::kAddBf16;
      if (lock.locked() && !(add && only_adds)) memory_.values.order(rank);
      if (!lock.locked()) only_adds = 1;
      only_adds = only_adds && add;
      for (std::size_t j = i; j < end_of_task; ++j) {
        const auto& s = layout_.segments[j];
        const std::int64_t begin = std::max(first, s.offset);
        const std::int64_t end = std::min(last, s.offset + s.length);
        if (begin >= end) continue;
        if (!lock.locked()) lock = memory_.values.lock(rank, mpi::LockType::kShared);
        const auto from = static_cast<std::size_t>(begin - first);
        const auto n = static_cast<std::size_t>(end - begin);
        const auto at = static_cast<std::size_t>(base + s.ps_offset + (begin - s.offset));
        const auto values = [&] { return part.values.subspan(from, n); };
        const auto wire = [&] { return part.wire.subspan(from, n); };
        switch (part.move) {
          case Move::kGet: memory_.values.get(values(), rank, at); break;
          case Move::kTake: memory_.values.fetch_and_fill(values(), 0.0f, rank, at); break;
          case Move::kPut: memory_.values.put(values(), rank, at); break;
          case Move::kAdd: memory_.values.accumulate(values(), rank, at); break;
          case Move::kAddBf16: memory_.values.accumulate_bf16(wire(), rank, at); break;
          case Move::kTakeBf16: memory_.values.take_bf16(wire(), rank, at); break;
          case Move::kZero: memory_.values.fill(n, 0.0f, rank, at); break;
        }
      }
    }
    i = end_of_task;
  }
  if (!started) complete();
}

void ParameterStore::complete() {
  for (auto& lock : epochs_) lock.unlock();
}

void ParameterStore::start_push(std::int64_t first, std::span<const float> delta) {
  transfer(first, {{Move::kAdd, 0, writable(delta)}}, /*started=*/true);
}

void ParameterStore::start_accumulate(std::int64_t first, std::span<const float> grads) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer(first, {{Move::kAdd, 1, writable(grads)}}, /*started=*/true);
}

void ParameterStore::start_pull(std::span<float> values) {
  check_size(values.size());
  transfer(0, {{Move::kGet, 0, values}}, /*started=*/true);
}

void ParameterStore::start_push_bf16(std::int64_t first, std::span<const std::uint16_t> delta) {
  transfer(first, {{Move::kAddBf16, 0, {}, writable(delta)}}, /*started=*/true);
}

void ParameterStore::start_accumulate_bf16(std::int64_t first,
                                           std::span<const std::uint16_t> grads) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer(first, {{Move::kAddBf16, 1, {}, writable(grads)}}, /*started=*/true);
}

void ParameterStore::pull(std::span<float> values) { transfer(values, {Move::kGet, 0, values}); }

void ParameterStore::pull(std::int64_t first, std::span<float> values) {
  transfer(first, {{Move::kGet, 0, values}});
}

void ParameterStore::push(std::int64_t first, std::span<const float> delta) {
  transfer(first, {{Move::kAdd, 0, writable(delta)}});
}

void ParameterStore::push(std::span<const float> delta) {
  transfer(delta, {Move::kAdd, 0, writable(delta)});
}

std::int64_t ParameterStore::pull_counting(std::span<float> values, ControlSlot count) {
  if (!values.empty()) check_size(values.size());
  // Completes the started pushes, with the pull if there is one.
  const auto finish_values = [&] {
    if (values.empty()) {
      complete();
    } else {
      transfer(0, {{Move::kGet, 0, values}});
    }
  };
  // One-sided: the pushes (and the pull) complete at the ps before the count moves, so that a
  // count of N means N updates are in the parameters (a checkpoint named by it holds them); the
  // count's atomic costs microseconds there. Served: all in flight together, one round trip.
  const bool in_order = !served();
  if (in_order) finish_values();
  std::int64_t before = 0;
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  memory_.counters.fetch_and_op(1, before, control_rank_, slot_offset(count, 0), mpi::Op::kSum);
  if (!in_order) finish_values();
  lock.unlock();
  return before + 1;
}

void ParameterStore::assign(std::span<const float> values) {
  transfer(values, {Move::kPut, 0, writable(values)});
}

void ParameterStore::assign(std::int64_t first, std::span<const float> values) {
  transfer(first, {{Move::kPut, 0, writable(values)}});
}

void ParameterStore::take_gradients(std::span<float> sums) {
  check_size(sums.size());
  take_gradients(0, sums);
}

void ParameterStore::take_gradients(std::int64_t first, std::span<float> sums) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer(first, {{served() ? Move::kTake : Move::kGet, 1, sums}});
}

void ParameterStore::clear_gradients() {
  clear_gradients(0, static_cast<std::size_t>(num_parameters_));
}

void ParameterStore::clear_gradients(std::int64_t first, std::size_t count) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  if (served() || count == 0) return;
  transfer(first, {{Move::kZero, 1, {}, {}, count}});
}

void ParameterStore::take_gradients_bf16(std::span<std::uint16_t> sums) {
  check_size(sums.size());
  take_gradients_bf16(0, sums);
}

void ParameterStore::take_gradients_bf16(std::int64_t first, std::span<std::uint16_t> sums) {
  if (!accumulators_) throw Error("parameter store: made without gradient accumulators");
  transfer(first, {{Move::kTakeBf16, 1, {}, sums}});
}

std::size_t ParameterStore::slot_offset(ControlSlot slot, int worker) const {
  check_open();
  std::size_t offset = static_cast<std::size_t>(slot);
  if (slot == ControlSlot::kWorkerBase) {
    if (worker < 0 || worker >= 3 * num_workers_)
      throw InvalidArgument("parameter store: no worker " + std::to_string(worker));
    offset += static_cast<std::size_t>(worker);
  }
  return offset;
}

std::int64_t ParameterStore::read(ControlSlot slot, int worker) {
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  return memory_.counters.fetch_and_op(0, control_rank_, slot_offset(slot, worker), mpi::Op::kNoOp);
}

void ParameterStore::read(ControlSlot first, std::span<std::int64_t> values, int worker) {
  const std::size_t offset = slot_offset(first, worker);
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  // MPI_Get_accumulate with NO_OP: an atomic read against concurrent fetch-and-ops on the slots.
  memory_.counters.get_atomic(values, control_rank_, offset);
}

void ParameterStore::update(std::initializer_list<SlotUpdate> updates) {
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  for (const SlotUpdate& u : updates) {
    memory_.counters.accumulate(std::span<const std::int64_t>(&u.value, 1), control_rank_,
                                slot_offset(u.slot, u.worker), u.op);
    memory_.counters.order(control_rank_);
  }
}

std::int64_t ParameterStore::exchange(ControlSlot slot, std::int64_t value, int worker) {
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  return memory_.counters.fetch_and_op(value, control_rank_, slot_offset(slot, worker), mpi::Op::kReplace);
}

std::int64_t ParameterStore::fetch_add(ControlSlot slot, std::int64_t value, int worker) {
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kShared);
  return memory_.counters.fetch_and_op(value, control_rank_, slot_offset(slot, worker), mpi::Op::kSum);
}

std::int64_t ParameterStore::compare_and_swap(ControlSlot slot, std::int64_t expected,
                                              std::int64_t desired) {
  // A served window applies each request whole, so there the swap is one request.
  if (memory_.counters.served()) {
    auto lock = memory_.counters.lock(control_rank_);
    return memory_.counters.compare_and_swap(desired, expected, control_rank_, slot_offset(slot, 0));
  }
  // An exclusive epoch makes the read and the write one atomic step. (MPI_Compare_and_swap on
  // 8-byte integers crashes Open MPI 4's shared-memory transport; see mpi/window.h.)
  auto lock = memory_.counters.lock(control_rank_, mpi::LockType::kExclusive);
  const std::size_t offset = slot_offset(slot, 0);
  const std::int64_t seen = memory_.counters.fetch_and_op(0, control_rank_, offset, mpi::Op::kNoOp);
  if (seen == expected) memory_.counters.fetch_and_op(desired, control_rank_, offset, mpi::Op::kReplace);
  return seen;
}

std::vector<std::int64_t> ParameterStore::read_worker_slots(int block) {
  check_open();
  if (block < 0 || block > 2)
    throw InvalidArgument("parameter store: no slot block " + std::to_string(block));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(num_workers_));
  read(ControlSlot::kWorkerBase, slots, block * num_workers_);
  return slots;
}

}  // namespace cohort
