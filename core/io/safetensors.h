#pragma once
// Checkpoint files in the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian uint64][N bytes: JSON header, space-padded][data region]
//
// The header maps each tensor name to {"dtype":"F32","shape":[...],"data_offsets":[begin,end]}
// (offsets relative to the start of the data region) and holds "__metadata__", a string -> string
// map. Any safetensors reader (Python's safetensors, numpy plus json) can load the tensors of a
// Cohort checkpoint; the checksums below are ordinary metadata strings to such a reader.
//
// Every byte of the file is checksummed, with CRC-32C (Castagnoli) written as 8 lower-case hex
// digits in __metadata__:
// - crc32c: the CRC of the whole data region;
// - header_crc32c: the CRC of the first 8 + N bytes (the length field and the whole header,
//   padding included) with the 8 digits of header_crc32c itself read as "00000000". The writer
//   emits compact JSON, so the field appears in the header exactly once, spelled
//   "header_crc32c":"<8 digits>"; a reader finds it there, zeroes the digits and compares.
//
// Format versions (metadata format_version): "2" has both checksums and is what this build
// writes. "1" (files from before the header checksum) has crc32c alone and is still read, its
// header trusted as before; a version "1" file that nevertheless holds header_crc32c is verified.
// Bumping the version is what keeps a damaged field name from passing for an old file: a "2"
// without header_crc32c is rejected.
//
// Cohort's metadata always has format_version, global_step, model, mode and the checksums;
// checkpoints of a model (core/io/saver.h) add optimizer and optimizer_iterations. The count
// fields, global_step and optimizer_iterations, hold a whole decimal number as std::to_string
// writes it (digits only: no sign, space, leading zero, exponent or fraction) from 0 to
// kMaxCheckpointCount; a file whose count is anything else is unusable.
//
//   cohort::Checkpoint ckpt;
//   ckpt.metadata["global_step"] = "300";
//   ckpt.tensors.push_back({"hidden1/kernel", {784, 256}, std::move(values)});
//   cohort::write_checkpoint("/tmp/run/model.ckpt-300.safetensors", ckpt);
//   cohort::Checkpoint back = cohort::read_checkpoint("/tmp/run/model.ckpt-300.safetensors");
//
// CheckpointManager (core/io/checkpoint.h) names, indexes, prunes and restores these files.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/base/shape.h"
#include "cohort/core/base/crc32c.h"
#include "cohort/core/io/file.h"

namespace cohort {

/// The largest count (global_step, optimizer_iterations) a checkpoint may hold: 10^11, far beyond
/// any real run and far below every limit of the arithmetic done with it. A restored global step
/// keeps counting up and is packed above 24 bits in sync mode's control word (it must stay under
/// 2^39), steps and examples are multiplied together, and Adam's bias correction takes
/// pow(beta, iterations) as a double (exact below 2^53); a huge or negative count would overflow
/// there or make the update NaN.
inline constexpr std::int64_t kMaxCheckpointCount = 100'000'000'000;

/// One named float32 tensor of a checkpoint: a variable ("hidden1/kernel") or an optimizer slot
/// ("optimizer/momentum/hidden1/kernel"). values.size() == num_elements(shape), row-major.
struct CheckpointTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

/// The contents of one checkpoint file. A plain value type.
struct Checkpoint {
  /// In file order (the order they were written in).
  std::vector<CheckpointTensor> tensors;
  /// The header's __metadata__: global_step, model, mode, format_version, the checksums and
  /// anything else the writer added.
  std::map<std::string, std::string> metadata;
  /// read_safetensors() of another framework's file: its tensors that are not floating point
  /// (integers, booleans, float8), by name, with their dtype ("I64"), which are not read.
  std::map<std::string, std::string> passed_over;

  /// metadata["global_step"] as an integer; throws CheckpointError when it is absent or not a
  /// count (see count()).
  std::int64_t global_step() const;
  /// The count in metadata[field] ("global_step", "optimizer_iterations"), std::nullopt when the
  /// field is absent. Throws CheckpointError naming the field and its value unless that is a
  /// whole decimal number from 0 to kMaxCheckpointCount, spelled as std::to_string spells it.
  /// read_checkpoint() has checked the count fields of a checkpoint it returns.
  std::optional<std::int64_t> count(const std::string& field) const;
  /// The tensor named `name`, or nullptr. Linear in the number of tensors.
  const CheckpointTensor* find(const std::string& name) const;
};

/// Writes `checkpoint` to `path` crash-safely (see write_file_atomically): after a crash `path`
/// holds either its old contents or the whole new checkpoint, never a mix.
///
/// Tensors are written in vector order, the header in that order too, so equal checkpoints make
/// byte-identical files. The metadata must hold "global_step" and may hold
/// "optimizer_iterations", both counts (see Checkpoint::count()); the writer sets
/// "format_version" ("2"), "crc32c" and "header_crc32c" itself and records an absent "model" or
/// "mode" as "". Throws InvalidArgument for a malformed checkpoint (empty, duplicate or reserved
/// tensor name, negative dimension, value count that does not match the shape, no global_step,
/// a count field that is not a count) and
/// CheckpointError when the file cannot be written. Blocking (ends with two fsyncs); safe to call
/// from several threads for different paths.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                      const BeforeRename& before_rename = nullptr);

/// Reads and validates the checkpoint at `path`. Throws CheckpointError, naming the file and the
/// fault, unless all of this holds:
/// - the file has the 8-byte header length, and that length fits in the file and is at most
///   100,000,000 bytes (the limit of the reference implementation);
/// - when the header holds header_crc32c (format version "2" must), it is 8 lower-case hex
///   digits that match the length field and the header;
/// - the header is a JSON object; every entry but __metadata__ has dtype "F32", a shape of
///   non-negative integers and data_offsets [begin, end] with begin <= end, and
///   4 * num_elements(shape) == end - begin;
/// - the tensors cover the data region exactly, as the safetensors format requires: sorted by
///   offset they start at 0, neither overlap nor leave holes, and the last ends at the end of
///   the file (a shorter file is reported as truncated, a longer one as trailing bytes);
/// - __metadata__ is a string -> string map with format_version "1" or "2", a global_step, an
///   optimizer_iterations (if any) that are counts (see Checkpoint::count()), and a crc32c of 8
///   lower-case hex digits that matches the data region.
/// Blocking; reads the file once. Thread-safe.
Checkpoint read_checkpoint(const std::string& path);

/// The checkpoint at `path` without its tensors: its metadata, read from the header alone and
/// checked as read_checkpoint() checks the header (its checksum, the layout, the metadata), not
/// the data, which is not read. Throws CheckpointError as read_checkpoint() does.
Checkpoint read_checkpoint_header(const std::string& path);

/// Reads the tensors of any safetensors file: weights another framework saved (Hugging Face's
/// save_file from PyTorch, NumPy or TensorFlow), to warm-start a Cohort model from. Its F32,
/// F16, BF16 and F64 tensors are converted to float32, each value checked finite and within
/// float32's range (else refused, naming the tensor and the element); tensors of the format's
/// other dtypes (integers, booleans, float8: a BatchNorm's num_batches_tracked) are passed
/// over. Its metadata is returned as the file holds it, often none, and nothing in it is
/// required. The layout rules of read_checkpoint() hold. A file whose metadata has
/// format_version is a Cohort checkpoint and is read as read_checkpoint() reads it, checksums
/// and all. Throws CheckpointError naming the file and the fault. Blocking; thread-safe.
Checkpoint read_safetensors(const std::string& path);

}  // namespace cohort
