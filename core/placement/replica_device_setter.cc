#include "cohort/core/placement/replica_device_setter.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"

namespace cohort {

COHORT_DEFINE_int(max_shard_bytes, std::int64_t{64} << 20,
                  "variables larger than this many bytes are partitioned over several ps tasks "
                  "along their first dimension (0: never partition)",
                  flags::Range{0, 1e18}, flags::kSameOnAllRanks);
COHORT_DEFINE_string(placement_strategy, "round_robin",
                     "how variables are spread over ps tasks: round_robin, or greedy (fewest "
                     "bytes first)",
                     flags::Choices{"round_robin", "greedy"}, flags::kSameOnAllRanks);
COHORT_DEFINE_bool(log_device_placement, false, "print where each variable is placed");

namespace {

constexpr std::int64_t kBytesPerElement = sizeof(float);

DeviceSpec ps_device(int task) {
  DeviceSpec spec;
  spec.job = "ps";
  spec.task = task;
  return spec;
}

}  // namespace

ReplicaDeviceSetter::ReplicaDeviceSetter() : ReplicaDeviceSetter(ReplicaDeviceSetterOptions{}) {}

ReplicaDeviceSetter::ReplicaDeviceSetter(ReplicaDeviceSetterOptions options)
    : options_(std::move(options)), worker_device_(DeviceSpec::parse(options_.worker_device)) {
  if (options_.ps_tasks < 0)
    throw InvalidArgument("ReplicaDeviceSetter: ps_tasks is " + std::to_string(options_.ps_tasks) +
                          ", must be >= 0");
  if (options_.max_shard_bytes < 0)
    throw InvalidArgument("ReplicaDeviceSetter: max_shard_bytes is " +
                          std::to_string(options_.max_shard_bytes) + ", must be >= 0");
  bytes_per_ps_.assign(static_cast<std::size_t>(options_.ps_tasks), 0);
}

std::int64_t ReplicaDeviceSetter::bytes_of(const Shape& shape) {
  return num_elements(shape) * kBytesPerElement;
}

int ReplicaDeviceSetter::choose_task(const std::vector<int>& taken) {
  const auto free = [&](int task) {
    return std::find(taken.begin(), taken.end(), task) == taken.end();
  };
  if (options_.strategy == PlacementStrategy::kRoundRobin) {
    // The caller never asks for more parts than tasks, so a free task is at most ps_tasks away.
    while (!free(next_task_)) next_task_ = (next_task_ + 1) % options_.ps_tasks;
    const int task = next_task_;
    next_task_ = (next_task_ + 1) % options_.ps_tasks;
    return task;
  }
  int best = -1;
  for (int task = 0; task < options_.ps_tasks; ++task)
    if (free(task) && (best < 0 || bytes_per_ps_[task] < bytes_per_ps_[best])) best = task;
  return best;
}

VariablePlacement ReplicaDeviceSetter::place(const std::string& variable_name, const Shape& shape) {
  if (variable_name.empty()) throw InvalidArgument("ReplicaDeviceSetter: empty variable name");
  for (std::int64_t d : shape)
    if (d < 0)
      throw InvalidArgument("ReplicaDeviceSetter: variable \"" + variable_name +
                            "\" has a negative dimension in shape " + cohort::to_string(shape));
  if (names_.count(variable_name))
    throw InvalidArgument("ReplicaDeviceSetter: variable \"" + variable_name +
                          "\" is placed twice");

  const std::int64_t size = num_elements(shape);
  const std::int64_t bytes = size * kBytesPerElement;
  VariablePlacement placement;

  if (options_.ps_tasks == 0) {
    placement.parts.push_back({-1, 0, size});
    placement.device = worker_device_;
  } else {
    std::int64_t parts = 1;
    const std::int64_t rows = shape.empty() ? 1 : shape.front();
    if (options_.max_shard_bytes > 0 && bytes > options_.max_shard_bytes && rows >= 2) {
      const std::int64_t row_bytes = bytes / rows;
      const std::int64_t rows_per_shard = std::max<std::int64_t>(1, options_.max_shard_bytes / row_bytes);
      parts = (rows + rows_per_shard - 1) / rows_per_shard;
      parts = std::min({parts, static_cast<std::int64_t>(options_.ps_tasks), rows});
    }
    const std::int64_t row_size = rows == 0 ? 0 : size / rows;
    const std::int64_t base = rows / parts, extra = rows % parts;
    std::vector<int> taken;
    std::int64_t row = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      const std::int64_t part_rows = base + (p < extra ? 1 : 0);
      const int task = choose_task(taken);
      taken.push_back(task);
      // An unpartitioned variable is one part over all elements, whatever its rank.
      const std::int64_t begin = parts == 1 ? 0 : row * row_size;
      const std::int64_t end = parts == 1 ? size : (row + part_rows) * row_size;
      placement.parts.push_back({task, begin, end});
      bytes_per_ps_[static_cast<std::size_t>(task)] += (end - begin) * kBytesPerElement;
      row += part_rows;
    }
    placement.device = ps_device(placement.parts.front().ps_task);
  }

  names_.insert(variable_name);
  entries_.push_back({variable_name, shape, bytes, placement});
  if (options_.log_device_placement) {
    const Entry& e = entries_.back();
    const std::string line = "[" + process_label() + "] variable " + e.name + " " +
                             cohort::to_string(e.shape) + " (" + std::to_string(e.bytes) +
                             " bytes) -> " + devices_text(e);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return placement;
}

std::string ReplicaDeviceSetter::devices_text(const Entry& entry) {
  const VariablePlacement& p = entry.placement;
  if (!p.partitioned()) return p.device.empty() ? "(local)" : p.device.to_string();
  // Parts of a partitioned variable are whole rows: show row ranges, which read better than
  // element ranges.
  const std::int64_t row_size = num_elements(entry.shape) / entry.shape.front();
  std::string text;
  for (const auto& part : p.parts)
    text += (text.empty() ? "" : " ") + ps_device(part.ps_task).to_string() + "[" +
            std::to_string(part.begin / row_size) + ":" + std::to_string(part.end / row_size) + ")";
  return text;
}

std::string ReplicaDeviceSetter::table() const {
  std::size_t name_w = 8, shape_w = 5, bytes_w = 5;
  for (const Entry& e : entries_) {
    name_w = std::max(name_w, e.name.size());
    shape_w = std::max(shape_w, cohort::to_string(e.shape).size());
    bytes_w = std::max(bytes_w, std::to_string(e.bytes).size());
  }
  const auto pad = [](std::string s, std::size_t w, bool right) {
    const std::string fill(w > s.size() ? w - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  std::ostringstream out;
  out << pad("variable", name_w, false) << "  " << pad("shape", shape_w, false) << "  "
      << pad("bytes", bytes_w, true) << "  device\n";
  for (const Entry& e : entries_) {
    out << pad(e.name, name_w, false) << "  " << pad(cohort::to_string(e.shape), shape_w, false)
        << "  " << pad(std::to_string(e.bytes), bytes_w, true) << "  "
        << devices_text(e) << "\n";
  }
  for (int task = 0; task < options_.ps_tasks; ++task)
    out << ps_device(task).to_string() << ": " << bytes_per_ps_[static_cast<std::size_t>(task)]
        << " bytes\n";
  return out.str();
}

ReplicaDeviceSetterOptions replica_device_setter_options_from_flags(int ps_tasks,
                                                                    std::string worker_device) {
  ReplicaDeviceSetterOptions options;
  options.ps_tasks = ps_tasks;
  options.worker_device = std::move(worker_device);
  if (FLAGS_placement_strategy == "round_robin") {
    options.strategy = PlacementStrategy::kRoundRobin;
  } else if (FLAGS_placement_strategy == "greedy") {
    options.strategy = PlacementStrategy::kGreedyBytes;
  } else {
    throw flags::FlagError("flag --placement_strategy: unknown value \"" +
                           FLAGS_placement_strategy + "\" (expected round_robin or greedy)");
  }
  if (FLAGS_max_shard_bytes < 0)
    throw flags::FlagError("flag --max_shard_bytes: " + std::to_string(FLAGS_max_shard_bytes) +
                           " is negative (0 turns partitioning off)");
  options.max_shard_bytes = FLAGS_max_shard_bytes;
  options.log_device_placement = FLAGS_log_device_placement;
  return options;
}

}  // namespace cohort
