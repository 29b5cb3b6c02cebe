#pragma once
// Checkpoint files in the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian uint64][N bytes: JSON header, space-padded][data region]
//
// The header maps each tensor name to {"dtype":"F32","shape":[...],"data_offsets":[begin,end]}
// (offsets relative to the start of the data region) and holds "__metadata__", a string -> string
// map. Cohort's metadata always has format_version ("1"), global_step, model, mode and crc32c:
// the CRC-32C (Castagnoli) of the whole data region as 8 lower-case hex digits. Any safetensors
// reader (Python's safetensors, numpy plus json) can load the tensors of a Cohort checkpoint.
//
//   cohort::Checkpoint ckpt;
//   ckpt.metadata["global_step"] = "300";
//   ckpt.tensors.push_back({"hidden1/kernel", {784, 256}, std::move(values)});
//   cohort::write_checkpoint("/tmp/run/model.ckpt-300.safetensors", ckpt);
//   cohort::Checkpoint back = cohort::read_checkpoint("/tmp/run/model.ckpt-300.safetensors");
//
// CheckpointManager (core/checkpoint.h) names, indexes, prunes and restores these files.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/base/shape.h"
#include "cohort/core/io/crc32c.h"
#include "cohort/core/io/file.h"

namespace cohort {

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
  /// The header's __metadata__: global_step, model, mode, format_version, crc32c and anything
  /// else the writer added.
  std::map<std::string, std::string> metadata;

  /// metadata["global_step"] as an integer; throws CheckpointError when it is absent or not a
  /// non-negative integer.
  std::int64_t global_step() const;
  /// The tensor named `name`, or nullptr. Linear in the number of tensors.
  const CheckpointTensor* find(const std::string& name) const;
};

/// Writes `checkpoint` to `path` crash-safely (see write_file_atomically): after a crash `path`
/// holds either its old contents or the whole new checkpoint, never a mix.
///
/// Tensors are written in vector order, the header in that order too, so equal checkpoints make
/// byte-identical files. The metadata must hold "global_step" (a non-negative integer); the
/// writer sets "format_version" and "crc32c" itself and records an absent "model" or "mode" as
/// "". Throws InvalidArgument for a malformed checkpoint (empty, duplicate or reserved tensor
/// name, negative dimension, value count that does not match the shape, no global_step) and
/// CheckpointError when the file cannot be written. Blocking (ends with two fsyncs); safe to call
/// from several threads for different paths.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                      const BeforeRename& before_rename = nullptr);

/// Reads and validates the checkpoint at `path`. Throws CheckpointError, naming the file and the
/// fault, unless all of this holds:
/// - the file has the 8-byte header length, and that length fits in the file and is at most
///   100,000,000 bytes (the limit of the reference implementation);
/// - the header is a JSON object; every entry but __metadata__ has dtype "F32", a shape of
///   non-negative integers and data_offsets [begin, end] with begin <= end, and
///   4 * num_elements(shape) == end - begin;
/// - the tensors cover the data region exactly, as the safetensors format requires: sorted by
///   offset they start at 0, neither overlap nor leave holes, and the last ends at the end of
///   the file (a shorter file is reported as truncated, a longer one as trailing bytes);
/// - __metadata__ is a string -> string map with format_version "1", a global_step and a crc32c
///   that matches the data region.
/// Blocking; reads the file once. Thread-safe.
Checkpoint read_checkpoint(const std::string& path);

}  // namespace cohort
