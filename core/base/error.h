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

/// The exit status of a job that ends with an error (app::Run's, and MPI_Abort's code, so
/// mpirun's and Slurm's), by what another try of the same command may expect: kFaultStatus, a
/// fault that may pass (an I/O error, a lost or stalled peer, memory); kInputStatus, an input
/// that will fail the same way again (a flag, a data file, a checkpoint that does not fit the
/// model); kDivergedStatus, training that diverged (a NaN loss). A stop signal that ends a
/// process at once gives 128 + the signal.
inline constexpr int kFaultStatus = 1;
inline constexpr int kInputStatus = 2;
inline constexpr int kDivergedStatus = 3;

/// Base of every error Cohort throws. Records the process label at the throw (context()), so a
/// report made later, on another thread or after the label changed, still names the process.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_status = kFaultStatus)
      : std::runtime_error(what), context_(process_label()), exit_status_(exit_status) {}
  /// The process label when the error was made ("worker:1 rank 3"; "" before MPI is up).
  const std::string& context() const noexcept { return context_; }
  /// The job's exit status where this error ends it: kFaultStatus unless the error says otherwise.
  int exit_status() const noexcept { return exit_status_; }

 private:
  std::string context_;
  int exit_status_;
};

/// A caller passed something malformed or inconsistent (a bad device string, a bad spec):
/// kInputStatus.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error(what, kInputStatus) {}
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
