#include "cohort/mpi/error.h"

#include <mpi.h>

#include <mutex>

namespace cohort::mpi {
namespace {

std::string DefaultLabel() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank >= 0 ? "rank " + std::to_string(rank) : "rank ?";
}

std::mutex label_mutex;
std::string label;

std::string Describe(const std::string& call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return call + " failed: " + std::string(text, length) + " [" + ProcessLabel() + ", " + file +
         ":" + std::to_string(line) + "]";
}

}  // namespace

MpiError::MpiError(const std::string& call, int code, const char* file, int line)
    : Error(Describe(call, code, file, line)), code_(code) {}

const std::string& ProcessLabel() {
  std::lock_guard lock(label_mutex);
  // The default is kept only once MPI can say the rank; before MPI_Init it is asked again.
  if (label.empty() || label == "rank ?") label = DefaultLabel();
  return label;
}

void SetProcessLabel(std::string new_label) {
  std::lock_guard lock(label_mutex);
  label = std::move(new_label);
}

}  // namespace cohort::mpi
