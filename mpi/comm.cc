#include "cohort/mpi/comm.h"

#include <cstdint>
#include <utility>

#include "cohort/core/base/bfloat16.h"
#include "cohort/mpi/environment.h"

namespace cohort::mpi {

Comm Comm::world() { return Comm(MPI_COMM_WORLD, false); }
Comm Comm::self() { return Comm(MPI_COMM_SELF, false); }

Comm Comm::adopt(MPI_Comm handle) {
  if (handle == MPI_COMM_WORLD || handle == MPI_COMM_SELF)
    throw InvalidArgument("Comm::adopt: WORLD and SELF are borrowed, never owned");
  if (handle != MPI_COMM_NULL) COHORT_MPI_CALL(MPI_Comm_set_errhandler(handle, MPI_ERRORS_RETURN));
  return Comm(handle, handle != MPI_COMM_NULL);
}

Comm::Comm(Comm&& other) noexcept
    : handle_(std::exchange(other.handle_, MPI_COMM_NULL)), owned_(std::exchange(other.owned_, false)) {}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    release();
    handle_ = std::exchange(other.handle_, MPI_COMM_NULL);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

Comm::~Comm() { release(); }

void Comm::release() noexcept {
  // After MPI_Finalize the handle is gone already; freeing it then is an error.
  if (owned_ && handle_ != MPI_COMM_NULL && Environment::active()) MPI_Comm_free(&handle_);
  handle_ = MPI_COMM_NULL;
  owned_ = false;
}

int Comm::rank() const {
  int r = 0;
  COHORT_MPI_CALL(MPI_Comm_rank(handle_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  COHORT_MPI_CALL(MPI_Comm_size(handle_, &s));
  return s;
}

Comm Comm::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  COHORT_MPI_CALL(MPI_Comm_split(handle_, color, key, &out));
  return adopt(out);
}

Comm Comm::split_shared() const {
  MPI_Comm out = MPI_COMM_NULL;
  COHORT_MPI_CALL(MPI_Comm_split_type(handle_, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &out));
  return adopt(out);
}

Comm Comm::dup() const {
  MPI_Comm out = MPI_COMM_NULL;
  COHORT_MPI_CALL(MPI_Comm_dup(handle_, &out));
  return adopt(out);
}

void Comm::barrier() const { COHORT_MPI_CALL(MPI_Barrier(handle_)); }

namespace {

// MPI_User_function: inout[i] += in[i], bfloat16 values added in float.
void add_bf16(void* in, void* inout, int* count, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *count; ++i) b[i] = bf16::from_float(bf16::to_float(a[i]) + bf16::to_float(b[i]));
}

// The bfloat16 sum, made once, on first use (MPI_Op_create is local); MPI_Finalize frees it.
MPI_Op bf16_sum() {
  static const MPI_Op sum = [] {
    MPI_Op op = MPI_OP_NULL;
    COHORT_MPI_CALL(MPI_Op_create(&add_bf16, /*commute=*/1, &op));
    return op;
  }();
  return sum;
}

}  // namespace

void Comm::allreduce_bf16(std::span<std::uint16_t> data) const {
  in_pieces(data, [&](std::span<std::uint16_t> piece) {
    COHORT_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, piece.data(), static_cast<int>(piece.size()),
                                  MPI_UINT16_T, bf16_sum(), handle_));
  });
}

Request Comm::iallreduce_bf16(std::span<std::uint16_t> data) const {
  MPI_Request request = MPI_REQUEST_NULL;
  COHORT_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count_of(data.size(), "iallreduce"),
                                 MPI_UINT16_T, bf16_sum(), handle_, &request));
  return Request(request);
}

Request Comm::ibarrier() const {
  MPI_Request request = MPI_REQUEST_NULL;
  COHORT_MPI_CALL(MPI_Ibarrier(handle_, &request));
  return Request(request);
}

std::vector<std::string> Comm::allgather_strings(const std::string& mine) const {
  const std::vector<std::vector<char>> all =
      allgatherv(std::span<const char>(mine.data(), mine.size()));
  std::vector<std::string> out;
  out.reserve(all.size());
  for (const std::vector<char>& chars : all) out.emplace_back(chars.begin(), chars.end());
  return out;
}

std::string Comm::bcast_string(const std::string& text, int root) const {
  std::uint64_t length = text.size();
  bcast(std::span<std::uint64_t>(&length, 1), root);
  std::string out = rank() == root ? text : std::string(length, '\0');
  bcast(std::span<char>(out.data(), out.size()), root);
  return out;
}

std::optional<MPI_Status> Comm::iprobe(int source, int tag) const {
  int flag = 0;
  MPI_Status status;
  COHORT_MPI_CALL(MPI_Iprobe(source, tag, handle_, &flag, &status));
  if (!flag) return std::nullopt;
  return status;
}

}  // namespace cohort::mpi
