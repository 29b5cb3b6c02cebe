#include "cohort/core/placement/gpu_placement.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include "cohort/core/base/error.h"

#if COHORT_HAVE_CUDA
#include "cohort/gpu/device.h"
#endif

namespace cohort {

bool built_with_cuda() {
#if COHORT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int visible_gpus() {
#if COHORT_HAVE_CUDA
  return gpu::device_count();
#else
  return 0;
#endif
}

DeviceSpec parse_compute_device(std::string_view text) {
  DeviceSpec spec;
  // "cpu" or "gpu", in any case (as device specs take their types).
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "cpu" || lower == "gpu") {
    spec.device_type = lower == "cpu" ? "CPU" : "GPU";
    return spec;
  }
  spec = DeviceSpec::parse(text);
  // Every worker is given the same device and computes on its own: a job or task would hold for
  // one of them at most, and was ignored.
  if (spec.job || spec.replica || spec.task)
    throw InvalidArgument("device \"" + std::string(text) +
                          "\" names a job, replica or task: each worker computes on its own "
                          "devices; give the device alone (cpu, gpu, /gpu:N or /cpu:0)");
  if (!spec.device_type)
    throw InvalidArgument("device \"" + std::string(text) +
                          "\" names no device type: use cpu, gpu, /gpu:N or /cpu:0");
  if (*spec.device_type == "CPU" && spec.device_index.value_or(0) != 0)
    throw InvalidArgument("device \"" + std::string(text) +
                          "\": a process has one CPU device, /cpu:0 (--threads sets its cores)");
  return spec;
}

std::vector<int> assign_gpus(const DeviceSpec& device, int towers, int local_rank, int local_size,
                             int visible, bool own) {
  if (device.device_type != "GPU") return {};
  const std::string spec = "device " + device.to_string();
  if (towers < 1) throw InvalidArgument(spec + ": --towers must be >= 1");
  if (!built_with_cuda())
    throw InvalidArgument(spec + ": this Cohort was built without CUDA (COHORT_WITH_CUDA=OFF)");
  if (visible < 1) {
    std::string why = "this process sees no CUDA device";
#if COHORT_HAVE_CUDA
    if (const std::string problem = gpu::device_problem(); !problem.empty()) why = problem;
#endif
    throw InvalidArgument(spec + ": " + why);
  }
  const auto plural = [](int n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  int first = 0;
  if (device.device_index) {
    first = *device.device_index;
    if (first + towers > visible)
      throw InvalidArgument(spec + " with " + plural(towers, "tower") + " needs GPUs " +
                            std::to_string(first) + ".." + std::to_string(first + towers - 1) +
                            "; this process sees " + plural(visible, "GPU"));
  } else if (own) {
    if (towers > visible)
      throw InvalidArgument(spec + ": " + plural(towers, "tower") + " need " +
                            plural(towers, "GPU") + "; this process was given " +
                            std::to_string(visible));
    first = 0;
  } else {
    if (local_size * towers > visible)
      throw InvalidArgument(spec + ": the " + plural(local_size, "worker") + " on this node with " +
                            plural(towers, "tower") + " each need " +
                            plural(local_size * towers, "GPU") + "; the node has " +
                            std::to_string(visible) +
                            " (name one, as /gpu:0, to let workers share it)");
    first = local_rank * towers;
  }
  std::vector<int> gpus;
  for (int t = 0; t < towers; ++t) gpus.push_back(first + t);
  return gpus;
}

std::int64_t first_gpu_pci_location() {
#if COHORT_HAVE_CUDA
  if (gpu::device_count() > 0) return gpu::device_properties(0).pci_location;
#endif
  return -1;
}

}  // namespace cohort
