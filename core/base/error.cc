#include "cohort/core/base/error.h"

#include <mutex>
#include <utility>

namespace cohort {
namespace {

std::mutex label_mutex;
std::string label;

}  // namespace

std::string process_label() {
  std::lock_guard lock(label_mutex);
  return label;
}

void set_process_label(std::string new_label) {
  std::lock_guard lock(label_mutex);
  label = std::move(new_label);
}

}  // namespace cohort
