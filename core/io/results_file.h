#pragma once
// The files a job writes its results to at its end (a metrics JSON, predictions): checked at
// its start, so that a path that cannot be written fails the job before training, not after.

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cohort {

/// A job's files, each a flag and its value ({"--predictions", "p.csv"}; an empty value: none).
using NamedFiles = std::vector<std::pair<std::string, std::string>>;

/// Throws InvalidArgument "<flag>=<path>: <fault>" unless a file can be written at `path`: its
/// directory exists and may be written in, and `path` is not a directory nor a file that may not
/// be written; or `path` is a terminal, a pipe or a device (/dev/stdout) that may be written to.
/// `flag` names where the path came from ("--metrics_json"). `others` are the job's other files
/// ({"--predict", "new.csv"}; a value may list several, comma-separated): `path` must not be
/// one of them, which it would overwrite (the same file, by std::filesystem::equivalent, or
/// where there is none yet the same place, as another output of the job).
void check_writable(const std::string& path, const std::string& flag, const NamedFiles& others = {});

/// check_writable() for each of `outputs` that is given, against the `inputs` and the outputs
/// before it: none may be written over another of the job's files.
void check_outputs(const NamedFiles& outputs, NamedFiles inputs);

/// One member of a results file: a number, a count or a text.
using JsonField = std::pair<std::string, std::variant<double, float, std::int64_t, std::string>>;

/// Replaces `path` (crash-safely, as write_file_atomically; a terminal, pipe or device is written
/// to) with one JSON object of `fields`, in
/// their order; numbers in the fewest digits that read back as the same double, or float (a
/// float 0.9828f is written 0.9828, not as the double it widens to); a NaN or an infinity (a
/// diverged loss) as null, since JSON has neither. Throws Error naming `path` when it cannot be
/// written.
void write_json_object(const std::string& path, const std::vector<JsonField>& fields);

}  // namespace cohort
