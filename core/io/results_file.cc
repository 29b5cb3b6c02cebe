#include "cohort/core/io/results_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"
#include "cohort/core/io/file.h"

namespace cohort {

void check_writable(const std::string& path, const std::string& flag, const NamedFiles& others) {
  const std::filesystem::path file(path);
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  std::string fault;
  if (path.empty()) {
    fault = "no file named";
  } else if (std::filesystem::is_directory(status)) {
    fault = "is a directory";
  } else if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // A terminal, a pipe, /dev/stdout: written in place.
    if (::access(path.c_str(), W_OK) != 0) fault = std::string("cannot write to it: ") + std::strerror(errno);
  } else if (!std::filesystem::is_directory(dir, ec)) {
    fault = "no directory " + dir.string();
  } else if (::access(dir.c_str(), W_OK) != 0) {
    fault = "cannot write in " + dir.string() + ": " + std::strerror(errno);
  } else if (std::filesystem::exists(status) && ::access(path.c_str(), W_OK) != 0) {
    fault = std::string("cannot write the file: ") + std::strerror(errno);
  }
  if (!fault.empty()) throw InvalidArgument(flag + "=" + path + ": " + fault);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) return;  // written in place
  const auto same = [&](const std::string& other) {
    std::error_code mine, theirs;
    if (std::filesystem::exists(status)) return std::filesystem::equivalent(file, other, mine);
    // Not there yet: another output of the job that would go to the same place.
    const auto a = std::filesystem::weakly_canonical(file, mine);
    const auto b = std::filesystem::weakly_canonical(other, theirs);
    return !mine && !theirs && a == b;
  };
  for (const auto& [other_flag, value] : others) {
    std::vector<std::string> files{value};  // one path (a comma in its name), or a list
    for (std::size_t begin = 0; begin < value.size();) {
      const std::size_t comma = std::min(value.find(',', begin), value.size());
      files.push_back(value.substr(begin, comma - begin));
      begin = comma + 1;
    }
    for (const std::string& other : files)
      if (!other.empty() && same(other))
        throw InvalidArgument(flag + "=" + path + ": the same file as " + other_flag + "=" + value +
                              ", which it would overwrite");
  }
}

void check_outputs(const NamedFiles& outputs, NamedFiles inputs) {
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    check_writable(path, flag, inputs);
    inputs.emplace_back(flag, path);
  }
}

void write_json_object(const std::string& path, const std::vector<JsonField>& fields) {
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const auto& [name, value] : fields) {
    if (std::holds_alternative<double>(value) || std::holds_alternative<float>(value)) {
      double number = 0;
      if (const float* single = std::get_if<float>(&value)) {
        // The double of the float's shortest decimal form, which nlohmann writes as short.
        char digits[32];
        const auto end = std::to_chars(digits, digits + sizeof digits, *single).ptr;
        std::from_chars(digits, end, number);
      } else {
        number = std::get<double>(value);
      }
      // nlohmann writes a non-finite number as null too; said here, where it is decided.
      object[name] = std::isfinite(number) ? nlohmann::ordered_json(number) : nlohmann::ordered_json();
    } else if (const std::int64_t* count = std::get_if<std::int64_t>(&value)) {
      object[name] = *count;
    } else {
      object[name] = std::get<std::string>(value);
    }
  }
  const std::string text = object.dump(2) + "\n";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    // A terminal, a pipe, /dev/stdout: written to, not replaced.
    std::ofstream out(path, std::ios::binary);
    if (!(out << text) || !out.flush()) throw Error(path + ": cannot write the results to it");
    return;
  }
  const std::span<const std::byte> bytes = std::as_bytes(std::span(text));
  try {
    write_file_atomically(path, std::span(&bytes, 1));
  } catch (const CheckpointError& e) {
    throw Error(std::string("cannot write the results: ") + e.what());
  }
}

}  // namespace cohort
