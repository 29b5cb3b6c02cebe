#pragma once
// The one exception hierarchy every Cohort library throws from, and who this process is in the
// messages. Library code never exits or aborts: it throws, and cohort::app::Run
// (core/train/app.h) reports the error with the process's label and takes the job down.
//
//   Error                       base of everything Cohort throws
//   ├── InvalidArgument         a caller passed something malformed (flags::FlagError, ...)
//   ├── mpi::MpiError           a failed MPI call            (mpi/error.h)
//   ├── gpu::CudaError          a failed CUDA/cuBLAS/cuDNN call (gpu/error.h)
//   ├── data::DataError         an unusable data file       (core/nn/data/dataset.h)
//   └── CheckpointError         an unusable checkpoint file (core/io/safetensors.h)

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort {

/// Who this process is, for messages: "worker:1 rank 3" once the cluster is known, "rank 3" once
/// MPI is up, "" before. Set by the layers that learn it (mpi::Environment, the cluster);
/// thread-safe.
std::string process_label();
void set_process_label(std::string label);

/// Base of every error Cohort throws. Records the process label at the throw (context()), so a
/// report made later, on another thread or after the label changed, still names the process.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what), context_(process_label()) {}
  /// The process label when the error was made ("worker:1 rank 3"; "" before MPI is up).
  const std::string& context() const noexcept { return context_; }

 private:
  std::string context_;
};

/// A caller passed something malformed or inconsistent (a bad device string, a bad spec).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// Text from outside (a file, a flag) for an error message: in single quotes, at most `limit`
/// bytes of it (then "..."), and every ASCII control byte (a newline, a NUL, a terminal escape)
/// written as \xNN, so that the message stays one readable line; UTF-8 text is kept.
std::string quote(std::string_view text, std::size_t limit = 200);
/// Any text (a whole error message) as one line: quote()'s escapes, without its quotes or limit.
std::string one_line(std::string_view text);
/// Binary content (a file's first bytes) for an error message: a C-like literal in double quotes,
/// every byte outside printable ASCII (and '"', '\\') written as \xNN, at most `limit` bytes.
std::string quote_bytes(std::string_view bytes, std::size_t limit = 16);

}  // namespace cohort
