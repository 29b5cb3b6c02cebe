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

std::string quote(std::string_view text, std::size_t limit) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char ch : text.substr(0, limit)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {  // UTF-8 text stays as it is
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (text.size() > limit) out += "...";
  return out + "'";
}

}  // namespace cohort
