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

namespace {

// `text` between `mark`s (none where it is '\0'): at most `limit` bytes of it (then "..."),
// with \xNN for every ASCII control byte and, where `binary`, for every byte outside printable
// ASCII, the mark and '\'.
std::string escaped(std::string_view text, std::size_t limit, char mark, bool binary) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  if (mark != '\0') out.push_back(mark);
  for (const char ch : text.substr(0, limit)) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = binary ? c >= 0x20 && c < 0x7f && ch != mark && ch != '\\'
                              : c >= 0x20 && c != 0x7f;  // UTF-8 text stays as it is
    if (plain) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (text.size() > limit) out += "...";
  if (mark != '\0') out.push_back(mark);
  return out;
}

}  // namespace

std::string one_line(std::string_view text) {
  return escaped(text, text.size(), '\0', /*binary=*/false);
}

std::string quote(std::string_view text, std::size_t limit) {
  return escaped(text, limit, '\'', /*binary=*/false);
}

std::string quote_bytes(std::string_view bytes, std::size_t limit) {
  return escaped(bytes, limit, '"', /*binary=*/true);
}

}  // namespace cohort
