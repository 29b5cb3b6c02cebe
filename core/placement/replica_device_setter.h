#pragma once
// Placement of variables on parameter-server tasks, in the spirit of
// tf.train.replica_device_setter: variables go to "/job:ps/task:N", everything else runs on the
// worker device.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cohort/core/base/shape.h"
#include "cohort/core/placement/device_spec.h"

namespace cohort {

/// Where one variable lives. `parts` always covers the flat variable exactly, in element order:
/// a single part [0, size) unless the variable is partitioned. A part with ps_task -1 is on the
/// worker (that is the case for every variable when there are no ps tasks).
struct VariablePlacement {
  struct Part {
    int ps_task = -1;          ///< ps task holding this part, -1: on the worker
    std::int64_t begin = 0;    ///< first element of the part in the flat variable
    std::int64_t end = 0;      ///< one past the last element
  };
  std::vector<Part> parts;
  /// "/job:ps/task:N" of the first part, or the worker device.
  DeviceSpec device;

  /// True when the variable is held by ps tasks rather than by the worker.
  bool on_ps() const { return !parts.empty() && parts.front().ps_task >= 0; }
  bool partitioned() const { return parts.size() > 1; }
};

/// How a ps task is chosen for each variable (or each part of a partitioned one).
enum class PlacementStrategy {
  kRoundRobin,   ///< ps 0, 1, ..., ps_tasks-1, 0, 1, ... in creation order (TensorFlow's default)
  kGreedyBytes,  ///< the ps task holding the fewest bytes so far, lowest index on ties
};

struct ReplicaDeviceSetterOptions {
  /// Number of ps tasks; 0 puts everything on the worker.
  int ps_tasks = 0;
  /// Device of everything that is not a variable, e.g. "/job:worker/task:0"; "" is "local".
  std::string worker_device = "";
  PlacementStrategy strategy = PlacementStrategy::kRoundRobin;
  /// A variable of more bytes than this is partitioned over several ps tasks; 0 never partitions.
  std::int64_t max_shard_bytes = 0;
  /// Print one line per placed variable to stderr.
  bool log_device_placement = false;
};

/// Decides where each variable of a graph lives.
///
/// Variables are float32 (4 bytes an element). Partitioning follows TensorFlow's
/// variable_axis_size_partitioner: a variable of more than max_shard_bytes bytes, of rank >= 1
/// with at least two rows, is split along its first dimension on row boundaries into
/// ceil(rows / max(1, floor(max_shard_bytes / bytes_per_row))) parts, capped at ps_tasks parts (so
/// every part is on a different ps task) and at the number of rows. Rows are spread evenly, the
/// first parts taking one extra row when they do not divide (TensorFlow's slicing). When the cap
/// applies, parts exceed max_shard_bytes. A single row larger than max_shard_bytes is never split.
/// Each part's ps task is chosen by the strategy among the tasks this variable does not use yet.
///
/// A value type (copyable; a copy carries the placements made so far). Not thread-safe: place()
/// mutates; the const members may be called from several threads when nothing places.
class ReplicaDeviceSetter {
 public:
  /// No ps tasks: everything on the local worker.
  ReplicaDeviceSetter();
  /// Throws InvalidArgument for a negative ps_tasks or max_shard_bytes or a bad worker_device.
  explicit ReplicaDeviceSetter(ReplicaDeviceSetterOptions options);

  /// Places the variable `variable_name` of shape `shape` and records it (load per ps, table).
  /// Throws InvalidArgument for an empty name, a name already placed, or a negative dimension.
  VariablePlacement place(const std::string& variable_name, const Shape& shape);

  /// The device of everything that is not a variable: the worker device.
  DeviceSpec op_device() const { return worker_device_; }
  int ps_tasks() const { return options_.ps_tasks; }
  const ReplicaDeviceSetterOptions& options() const { return options_; }
  /// Bytes of variables placed on each ps task so far (ps_tasks entries).
  std::vector<std::int64_t> bytes_per_ps() const { return bytes_per_ps_; }

  /// A text table of every placement so far, one line per variable in placement order (name,
  /// shape, bytes, and the device, or for a partitioned variable each part's device with its rows
  /// as "/job:ps/task:1[500:1000)"), then the bytes held by each ps task.
  std::string table() const;

  /// Bytes of a float32 variable of this shape.
  static std::int64_t bytes_of(const Shape& shape);

 private:
  struct Entry {
    std::string name;
    Shape shape;
    std::int64_t bytes = 0;
    VariablePlacement placement;
  };

  int choose_task(const std::vector<int>& taken);
  static std::string devices_text(const Entry& entry);

  ReplicaDeviceSetterOptions options_;
  DeviceSpec worker_device_;
  int next_task_ = 0;
  std::vector<std::int64_t> bytes_per_ps_;
  std::vector<Entry> entries_;
  std::set<std::string> names_;
};

/// Options from the flags --max_shard_bytes, --placement_strategy (round_robin | greedy) and
/// --log_device_placement, for a cluster of `ps_tasks` ps tasks and this worker's device. Throws
/// InvalidArgument (a flags::FlagError) naming the flag and the value when one is bad.
ReplicaDeviceSetterOptions replica_device_setter_options_from_flags(int ps_tasks,
                                                                    std::string worker_device);

}  // namespace cohort
