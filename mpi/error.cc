#include "cohort/mpi/error.h"

#include <mpi.h>

namespace cohort::mpi {
namespace {

// The process label, or the rank while no layer has set one (MPI may be up or not).
std::string label() {
  std::string text = process_label();
  if (!text.empty()) return text;
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank >= 0 ? "rank " + std::to_string(rank) : "rank ?";
}

std::string Describe(const std::string& call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return call + " failed: " + std::string(text, length) + " [" + label() + ", " + file +
         ":" + std::to_string(line) + "]";
}

}  // namespace

MpiError::MpiError(const std::string& call, int code, const char* file, int line)
    : Error(Describe(call, code, file, line)), code_(code) {}

}  // namespace cohort::mpi
