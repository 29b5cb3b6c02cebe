#pragma once
// Memory that the ranks of one node share (MPI_Win_allocate_shared): each rank reads and writes
// the others' elements with plain loads and stores.

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/mpi/comm.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {

/// `local_count` elements of T on each rank of a communicator whose ranks share memory (one
/// node: Comm::split_shared()), each rank's starting on a kAlignment-byte boundary and zeroed;
/// the counts may differ between ranks. Every rank sees every rank's elements (of()); what one
/// rank writes before barrier(), every rank reads after it.
///
/// Construction and destruction are collective over the communicator. Move-only; freeing is
/// skipped after MPI_Finalize and while an exception unwinds (as for Window). Throws MpiError
/// where MPI cannot share memory between the ranks (they are on different nodes).
template <typename T>
class SharedMemory {
 public:
  static constexpr std::size_t kAlignment = 64;

  SharedMemory() = default;
  SharedMemory(const Comm& comm, std::size_t local_count)
      : comm_(comm.dup()),
        local_count_(local_count),
        exceptions_at_start_(std::uncaught_exceptions()) {
    // Each rank's part a whole number of lines, and a line more to start the elements on one:
    // wherever MPI puts a part, every process maps it at the same offset within a page.
    const std::size_t per_line = kAlignment / sizeof(T);
    const std::size_t padded = (local_count + per_line - 1) / per_line * per_line + per_line;
    MPI_Info info = MPI_INFO_NULL;
    COHORT_MPI_CALL(MPI_Info_create(&info));
    MPI_Info_set(info, "alloc_shared_noncontig", "true");  // parts apart: no false sharing
    void* base = nullptr;
    const int status = MPI_Win_allocate_shared(static_cast<MPI_Aint>(padded * sizeof(T)),
                                               static_cast<int>(sizeof(T)), info, comm_.get(),
                                               &base, &win_);
    MPI_Info_free(&info);
    COHORT_MPI_CALL(status);
    // A window's error handler is MPI_ERRORS_ARE_FATAL whatever its communicator's.
    COHORT_MPI_CALL(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
    parts_.resize(static_cast<std::size_t>(comm_.size()));
    for (int r = 0; r < comm_.size(); ++r) {
      MPI_Aint bytes = 0;
      int unit = 0;
      void* at = nullptr;
      COHORT_MPI_CALL(MPI_Win_shared_query(win_, r, &bytes, &unit, &at));
      const auto address = reinterpret_cast<std::uintptr_t>(at);
      if (address % sizeof(T) != 0)
        throw Error("SharedMemory: MPI returned memory not aligned for its elements");
      const std::size_t shift = (kAlignment - address % kAlignment) % kAlignment / sizeof(T);
      const std::size_t usable = static_cast<std::size_t>(bytes) / sizeof(T) - per_line;
      parts_[static_cast<std::size_t>(r)] = {static_cast<T*>(at) + shift, usable};
    }
    // One passive epoch for the memory's life: MPI_Win_sync needs one to order loads and stores.
    COHORT_MPI_CALL(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
    std::fill(local().begin(), local().end(), T{});
    barrier();  // nobody reads a part still being zeroed
  }
  SharedMemory(SharedMemory&& other) noexcept { swap(other); }
  SharedMemory& operator=(SharedMemory&& other) noexcept {
    if (this != &other) {
      SharedMemory dying(std::move(other));
      swap(dying);
    }
    return *this;
  }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory() {
    if (win_ == MPI_WIN_NULL || !Environment::active()) return;
    if (std::uncaught_exceptions() > exceptions_at_start_) return;
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }

  /// Leaves the memory to the job's end: the destructor then frees nothing and so takes no
  /// collective step, for a rank that leaves after an error while its peers may wait in another
  /// collective (the job then ends with it, see app::Run). Not usable afterwards.
  void abandon() noexcept { win_ = MPI_WIN_NULL; }
  /// Made and not abandoned.
  bool active() const { return win_ != MPI_WIN_NULL; }

  const Comm& comm() const { return comm_; }
  /// Collective. What any rank wrote before it, every rank reads after it (MPI's unified memory
  /// model: a memory barrier, the ranks' barrier, a memory barrier).
  void barrier() {
    COHORT_MPI_CALL(MPI_Win_sync(win_));
    comm_.barrier();
    COHORT_MPI_CALL(MPI_Win_sync(win_));
  }
  /// This rank's elements.
  std::span<T> local() { return of(comm_.rank()).first(local_count_); }
  /// `rank`'s elements (its count rounded up to whole kAlignment-byte lines).
  std::span<T> of(int rank) { return parts_.at(static_cast<std::size_t>(rank)); }

 private:
  void swap(SharedMemory& other) noexcept {
    std::swap(comm_, other.comm_);
    std::swap(win_, other.win_);
    std::swap(parts_, other.parts_);
    std::swap(local_count_, other.local_count_);
    std::swap(exceptions_at_start_, other.exceptions_at_start_);
  }

  Comm comm_;
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<std::span<T>> parts_;
  std::size_t local_count_ = 0;
  int exceptions_at_start_ = 0;
};

/// Collective over `ranks`: calls make(), which builds something in shared memory and throws
/// MpiError where MPI makes no shared-memory window (Open MPI without its osc sm component).
/// True on every rank where it returned on all of them; false on every rank otherwise, so that
/// all go on without it alike.
template <typename F>
bool made_on_every_rank(const Comm& ranks, F&& make) {
  int made = 1;
  try {
    make();
  } catch (const MpiError&) {
    made = 0;
  }
  return ranks.allreduce(made, Op::kMin) == 1;
}

}  // namespace cohort::mpi
