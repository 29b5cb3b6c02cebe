#pragma once
// File reading the data loaders share (internal to core/nn/data): every fault is a DataError
// naming the file.

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "cohort/core/nn/data/dataset.h"

namespace cohort::data::detail {

/// Throws DataError("<where>: <fault>").
[[noreturn]] void fail(const std::string& where, const std::string& fault);

/// Throws InvalidArgument("<where>: shard index I of count C (...)") unless 0 <= index < count.
void check_shard(ShardSpec shard, const std::string& where);

/// The size of the regular file `path`; a DataError saying why when it is missing, a directory
/// or unreadable. `what` names the format expected, for the message.
std::uint64_t file_size(const std::string& path, const char* what);

std::ifstream open_file(const std::string& path);

/// Reads exactly `n` bytes; anything less is a fault (the file changed, or a read error).
void read_exactly(std::ifstream& in, char* out, std::uint64_t n, const std::string& path);

std::string read_whole_file(const std::string& path, const char* what);

}  // namespace cohort::data::detail
