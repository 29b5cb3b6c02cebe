#pragma once
// Device names in TensorFlow's syntax: "/job:worker/replica:0/task:1/device:GPU:0".

#include <optional>
#include <string>
#include <string_view>

namespace cohort {

/// Where something runs: a possibly partial device name. Every field is optional; an unset field
/// means "any" (or "wherever the enclosing scope says"). A plain value type: copyable, comparable,
/// no shared state.
///
/// Accepted syntax (the empty string and "/" are the empty spec), components in any order, each at
/// most once:
///
///   /job:NAME          NAME starts with a letter, then letters, digits, '_'
///   /replica:N  /task:N          N a non-negative decimal integer, or * (unset)
///   /device:TYPE:N  /device:TYPE:*  /device:TYPE  /device:*:N
///   /cpu:N  /gpu:N  /cpu:*  /gpu:*  /cpu  /gpu   short forms of /device:CPU:N, /device:GPU:N
///
/// TYPE is CPU or GPU in any case and is stored upper-case.
///
/// The canonical text (to_string) writes the set fields in the order job, replica, task, device,
/// always in the long device form: "/job:worker/replica:0/task:1/device:GPU:0", "/device:CPU:*"
/// for a type without an index. parse(to_string(s)) == s for every spec.
struct DeviceSpec {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<std::string> device_type;  ///< "CPU" or "GPU"
  std::optional<int> device_index;

  /// Parses a device string. Throws cohort::InvalidArgument quoting the whole string and naming
  /// the bad part (unknown field, bad number, empty or malformed job name, unknown device type,
  /// duplicate field, missing leading '/').
  static DeviceSpec parse(std::string_view text);

  /// The canonical text described above; "" for the empty spec.
  std::string to_string() const;

  /// True when no field is set.
  bool empty() const;

  /// This spec as an outer scope with `inner` nested inside it: every field `inner` sets overrides
  /// this one's, the others are kept (TensorFlow's DeviceSpec.make_merged_spec). One deliberate
  /// difference from TensorFlow: the device index goes with the device type, so when `inner` names
  /// a different device type than this spec, this spec's index is dropped ("/gpu:1" merged with
  /// "/cpu:*" is "/device:CPU:*", not "/device:CPU:1").
  DeviceSpec merged_with(const DeviceSpec& inner) const;

  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

}  // namespace cohort
