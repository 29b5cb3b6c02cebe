#include "cohort/core/placement/device_spec.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "cohort/core/base/error.h"

namespace cohort {
namespace {

[[noreturn]] void fail(std::string_view text, const std::string& what) {
  throw InvalidArgument("bad device spec \"" + std::string(text) + "\": " + what);
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return upper(a) == upper(b); }

// "*" leaves the field unset, as in TensorFlow's "/task:*".
std::optional<int> parse_index(std::string_view text, std::string_view field,
                               std::string_view value) {
  if (value == "*") return std::nullopt;
  int n = 0;
  // from_chars alone would accept a leading '-'; only plain digits are a valid index.
  const bool digits_only =
      !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (!digits_only || ec != std::errc() || end != value.data() + value.size())
    fail(text, std::string(field) + " \"" + std::string(value) +
                   "\" is not a non-negative integer");
  return n;
}

std::optional<std::string> parse_job(std::string_view text, std::string_view value) {
  if (value.empty()) fail(text, "empty job name");
  if (value == "*") return std::nullopt;
  const bool valid = std::isalpha(static_cast<unsigned char>(value.front())) &&
                     value.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "abcdefghijklmnopqrstuvwxyz0123456789_") ==
                         std::string_view::npos;
  if (!valid)
    fail(text, "job name \"" + std::string(value) +
                   "\" must start with a letter and hold only letters, digits and '_'");
  return std::string(value);
}

std::optional<std::string> parse_type(std::string_view text, std::string_view value) {
  if (value == "*") return std::nullopt;
  std::string type = upper(value);
  if (type != "CPU" && type != "GPU")
    fail(text, "unknown device type \"" + std::string(value) + "\" (expected CPU or GPU)");
  return type;
}

}  // namespace

DeviceSpec DeviceSpec::parse(std::string_view text) {
  DeviceSpec spec;
  if (text.empty() || text == "/") return spec;
  if (text.front() != '/') fail(text, "must start with '/'");

  bool seen_job = false, seen_replica = false, seen_task = false, seen_device = false;
  const auto once = [&](bool& seen, const char* field) {
    if (seen) fail(text, std::string("duplicate field \"") + field + "\"");
    seen = true;
  };

  std::size_t pos = 1;
  while (pos <= text.size()) {
    const std::size_t slash = std::min(text.find('/', pos), text.size());
    const std::string_view component = text.substr(pos, slash - pos);
    pos = slash + 1;
    if (component.empty()) fail(text, "empty component (doubled or trailing '/')");

    const std::size_t colon = component.find(':');
    const std::string_view field = component.substr(0, colon);
    if (colon == std::string_view::npos) {
      if (iequals(field, "cpu") || iequals(field, "gpu")) {  // a type alone, as TensorFlow reads it
        once(seen_device, "device");
        spec.device_type = upper(field);
        continue;
      }
      if (field == "job" || field == "replica" || field == "task" || field == "device")
        fail(text, "field \"" + std::string(field) + "\" has no value");
      fail(text, "unknown field \"" + std::string(field) + "\"");
    }
    const std::string_view value = component.substr(colon + 1);

    if (field == "job") {
      once(seen_job, "job");
      spec.job = parse_job(text, value);
    } else if (field == "replica") {
      once(seen_replica, "replica");
      spec.replica = parse_index(text, "replica", value);
    } else if (field == "task") {
      once(seen_task, "task");
      spec.task = parse_index(text, "task", value);
    } else if (field == "device") {
      once(seen_device, "device");
      const std::size_t sep = value.find(':');
      const std::string_view type = value.substr(0, sep);
      if (type.empty()) fail(text, "empty device type");
      spec.device_type = parse_type(text, type);
      if (sep != std::string_view::npos)
        spec.device_index = parse_index(text, "device index", value.substr(sep + 1));
    } else if (iequals(field, "cpu") || iequals(field, "gpu")) {
      once(seen_device, "device");
      spec.device_type = upper(field);
      spec.device_index = parse_index(text, "device index", value);
    } else {
      fail(text, "unknown field \"" + std::string(field) + "\"");
    }
  }
  return spec;
}

std::string DeviceSpec::to_string() const {
  std::string out;
  if (job) out += "/job:" + *job;
  if (replica) out += "/replica:" + std::to_string(*replica);
  if (task) out += "/task:" + std::to_string(*task);
  if (device_type || device_index) {
    out += "/device:" + device_type.value_or("*");
    out += ":" + (device_index ? std::to_string(*device_index) : std::string("*"));
  }
  return out;
}

bool DeviceSpec::empty() const { return *this == DeviceSpec{}; }

DeviceSpec DeviceSpec::merged_with(const DeviceSpec& inner) const {
  DeviceSpec merged = *this;
  if (inner.job) merged.job = inner.job;
  if (inner.replica) merged.replica = inner.replica;
  if (inner.task) merged.task = inner.task;
  if (inner.device_type) {
    if (inner.device_type != device_type) merged.device_index.reset();
    merged.device_type = inner.device_type;
  }
  if (inner.device_index) merged.device_index = inner.device_index;
  return merged;
}

}  // namespace cohort
