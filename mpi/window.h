#pragma once
// One-sided communication: a window of T elements on every rank of a communicator.

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/mpi/comm.h"
#include "cohort/mpi/datatype.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {

/// Passive-target lock kinds (MPI_LOCK_SHARED, MPI_LOCK_EXCLUSIVE).
enum class LockType { kShared, kExclusive };

namespace detail {

/// Calls fn(first, count) over [0, total) in pieces of at most `max_chunk` elements, so that no
/// single MPI call is given a count above what an int holds.
template <typename F>
void for_each_chunk(std::size_t total, std::size_t max_chunk, F&& fn) {
  for (std::size_t first = 0; first < total; first += max_chunk)
    fn(first, std::min(max_chunk, total - first));
}

}  // namespace detail

/// A window over memory the window owns (MPI_Win_allocate: on shared memory, accumulate runs ~8x
/// faster than on MPI_Win_create memory). Each rank holds `local_count` elements of T, zeroed at
/// creation; other ranks address them by (target rank, element offset).
///
/// Move-only: a move leaves the source null. Construction and destruction are collective over the
/// communicator (MPI_Win_allocate/free): destroy windows in the same order on every rank. Freeing
/// is skipped after MPI_Finalize, and while an exception unwinds through the destructor (a lone
/// rank in MPI_Win_free would hang instead of reaching app::Run's MPI_Abort). The window keeps its
/// own duplicate of the communicator, so the caller's Comm may be moved or freed. Errors return
/// (MPI_ERRORS_RETURN) and throw MpiError. Not thread-safe: main thread only (MPI_THREAD_FUNNELED).
///
/// Transfers (put, get, accumulate, fetch_and_op) are non-blocking in the MPI sense and must be
/// made inside a passive-target epoch, opened by a LockGuard; they complete at flush() or when the
/// guard unlocks:
///
///   mpi::Window<float> shard(comm, n);               // collective
///   {
///     auto lock = shard.lock(ps_rank);               // shared: concurrent accumulates are atomic
///     shard.accumulate(std::span<const float>(delta), ps_rank, 0);
///   }                                                // unlocked: the sum is complete at ps_rank
///
/// Transfers longer than INT_MAX elements are split into several MPI calls.
template <typename T>
class Window {
 public:
  /// A scoped passive-target epoch on one target (MPI_Win_lock) or on all (MPI_Win_lock_all).
  /// Move-only; the destructor unlocks, also while an exception unwinds (errors ignored there).
  class LockGuard {
   public:
    LockGuard() = default;
    LockGuard(LockGuard&& other) noexcept
        : win_(std::exchange(other.win_, MPI_WIN_NULL)), target_(other.target_) {}
    LockGuard& operator=(LockGuard&& other) noexcept {
      if (this != &other) {
        release();
        win_ = std::exchange(other.win_, MPI_WIN_NULL);
        target_ = other.target_;
      }
      return *this;
    }
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;
    ~LockGuard() { release(); }

    /// True until unlock() or destruction.
    bool locked() const { return win_ != MPI_WIN_NULL; }
    /// Blocking. Ends the epoch now (every transfer in it is complete); throws MpiError.
    void unlock() {
      if (!locked()) return;
      const MPI_Win win = std::exchange(win_, MPI_WIN_NULL);
      if (target_ == kAll)
        COHORT_MPI_CALL(MPI_Win_unlock_all(win));
      else
        COHORT_MPI_CALL(MPI_Win_unlock(target_, win));
    }

   private:
    friend class Window;
    static constexpr int kAll = -1;
    LockGuard(MPI_Win win, int target) : win_(win), target_(target) {}
    void release() noexcept {
      if (!locked() || !Environment::active()) return;
      if (target_ == kAll)
        MPI_Win_unlock_all(win_);
      else
        MPI_Win_unlock(target_, win_);
      win_ = MPI_WIN_NULL;
    }

    MPI_Win win_ = MPI_WIN_NULL;
    int target_ = kAll;
  };

  /// A null window.
  Window() = default;

  /// Collective over `comm`. Allocates `local_count` zeroed elements on this rank (counts may
  /// differ between ranks, and may be 0).
  Window(const Comm& comm, std::size_t local_count)
      : comm_(comm.dup()), exceptions_at_start_(std::uncaught_exceptions()) {
    const std::size_t bytes = local_count * sizeof(T);
    if (local_count != 0 && bytes / local_count != sizeof(T))
      throw InvalidArgument("Window: " + std::to_string(local_count) + " elements overflow");
    void* base = nullptr;
    COHORT_MPI_CALL(MPI_Win_allocate(static_cast<MPI_Aint>(bytes), static_cast<int>(sizeof(T)),
                                     MPI_INFO_NULL, comm_.get(), &base, &win_));
    COHORT_MPI_CALL(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
    base_ = static_cast<T*>(base);
    count_ = local_count;
    std::fill_n(base_, count_, T{});
    // The gather doubles as the barrier that keeps anyone from touching memory still being zeroed.
    const std::vector<std::uint64_t> counts = comm_.allgather(static_cast<std::uint64_t>(count_));
    counts_.assign(counts.begin(), counts.end());
  }

  Window(Window&& other) noexcept { swap(other); }
  Window& operator=(Window&& other) noexcept {
    if (this != &other) {
      Window dying(std::move(other));
      swap(dying);
    }
    return *this;
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() {
    // MPI_Win_free is collective: while an exception unwinds on this rank alone it would wait
    // for ranks that never come, and app::Run could never end the job. Then the window is left
    // for MPI_Finalize (or MPI_Abort) to reclaim.
    if (win_ == MPI_WIN_NULL || !Environment::active()) return;
    if (std::uncaught_exceptions() > exceptions_at_start_) return;
    MPI_Win_free(&win_);
  }

  bool is_null() const { return win_ == MPI_WIN_NULL; }
  MPI_Win get() const { return win_; }
  const Comm& comm() const { return comm_; }
  /// This rank's elements. Reading or writing them while other ranks may access the window needs
  /// a lock on this rank (or sync() inside one), as MPI's memory model requires.
  std::span<T> local() { return {base_, count_}; }
  std::span<const T> local() const { return {base_, count_}; }
  /// Number of elements `rank` holds.
  std::size_t count(int rank) const { return counts_.at(static_cast<std::size_t>(rank)); }

  /// Blocking until granted. Opens an epoch on `target`.
  [[nodiscard]] LockGuard lock(int target, LockType type = LockType::kShared) {
    check_target(target, "lock");
    const int kind = type == LockType::kExclusive ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED;
    COHORT_MPI_CALL(MPI_Win_lock(kind, target, 0, win_));
    return LockGuard(win_, target);
  }
  /// Opens a shared epoch on every rank of the window.
  [[nodiscard]] LockGuard lock_all() {
    COHORT_MPI_CALL(MPI_Win_lock_all(0, win_));
    return LockGuard(win_, LockGuard::kAll);
  }

  /// Non-blocking (completes at flush/unlock). Writes `src` to target's elements from `offset`.
  void put(std::span<const T> src, int target, std::size_t offset) {
    check_range(src.size(), target, offset, "put");
    detail::for_each_chunk(src.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      COHORT_MPI_CALL(MPI_Put(src.data() + first, static_cast<int>(n), datatype<T>(), target,
                              static_cast<MPI_Aint>(offset + first), static_cast<int>(n),
                              datatype<T>(), win_));
    });
  }
  /// Non-blocking (`dst` is valid after flush/unlock). Reads target's elements from `offset`.
  void get(std::span<T> dst, int target, std::size_t offset) {
    check_range(dst.size(), target, offset, "get");
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      COHORT_MPI_CALL(MPI_Get(dst.data() + first, static_cast<int>(n), datatype<T>(), target,
                              static_cast<MPI_Aint>(offset + first), static_cast<int>(n),
                              datatype<T>(), win_));
    });
  }
  /// Non-blocking. Combines `src` into target's elements from `offset`; element-wise atomic
  /// against other accumulates with the same op, so concurrent sums from many ranks lose nothing.
  void accumulate(std::span<const T> src, int target, std::size_t offset, Op op = Op::kSum) {
    check_range(src.size(), target, offset, "accumulate");
    detail::for_each_chunk(src.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      COHORT_MPI_CALL(MPI_Accumulate(src.data() + first, static_cast<int>(n), datatype<T>(), target,
                                     static_cast<MPI_Aint>(offset + first), static_cast<int>(n),
                                     datatype<T>(), to_mpi(op), win_));
    });
  }
  /// Blocking until the value is back (flushes `target`). Atomically combines `operand` into one
  /// element and returns the element's previous value. Op::kNoOp reads, Op::kReplace swaps.
  T fetch_and_op(T operand, int target, std::size_t offset, Op op = Op::kSum) {
    check_range(1, target, offset, "fetch_and_op");
    T result{};
    COHORT_MPI_CALL(MPI_Fetch_and_op(&operand, &result, datatype<T>(), target,
                                     static_cast<MPI_Aint>(offset), to_mpi(op), win_));
    COHORT_MPI_CALL(MPI_Win_flush(target, win_));
    return result;
  }

  /// Blocking until the value is back (flushes `target`). Atomically replaces one element with
  /// `desired` if it equals `expected`; returns the element's previous value either way.
  ///
  /// Open MPI 4.x crashes (SIGSEGV in its shared-memory transport, open-mpi/ompi#7967) on any
  /// 8-byte compare-and-swap while the vader BTL offers fetching atomics, its default. There,
  /// for 8-byte T this throws Error instead, unless OMPI_MCA_btl_vader_flags is set without
  /// "fetching-atomics" (which halves accumulate bandwidth). 4-byte T always works.
  T compare_and_swap(T desired, T expected, int target, std::size_t offset) {
    check_range(1, target, offset, "compare_and_swap");
    if constexpr (sizeof(T) == 8) check_wide_compare_and_swap();
    T result{};
    COHORT_MPI_CALL(MPI_Compare_and_swap(&desired, &expected, &result, datatype<T>(), target,
                                         static_cast<MPI_Aint>(offset), win_));
    COHORT_MPI_CALL(MPI_Win_flush(target, win_));
    return result;
  }
  /// Non-blocking (`dst` is valid after flush/unlock). Like get(), but each element is read
  /// atomically with respect to concurrent accumulates and fetch_and_ops (MPI_Get_accumulate with
  /// MPI_NO_OP), so a counter being incremented is never read torn.
  void get_atomic(std::span<T> dst, int target, std::size_t offset) {
    check_range(dst.size(), target, offset, "get_atomic");
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      COHORT_MPI_CALL(MPI_Get_accumulate(nullptr, 0, datatype<T>(), dst.data() + first,
                                         static_cast<int>(n), datatype<T>(), target,
                                         static_cast<MPI_Aint>(offset + first), static_cast<int>(n),
                                         datatype<T>(), MPI_NO_OP, win_));
    });
  }

  /// Blocking. Completes every transfer to `target` in the current epoch.
  void flush(int target) {
    check_target(target, "flush");
    COHORT_MPI_CALL(MPI_Win_flush(target, win_));
  }
  /// Blocking. Completes every transfer in the current epochs.
  void flush_all() { COHORT_MPI_CALL(MPI_Win_flush_all(win_)); }
  /// Synchronises this rank's view of its local memory with the window (MPI_Win_sync); call it
  /// inside an epoch on this rank before reading local() that others have written.
  void sync() { COHORT_MPI_CALL(MPI_Win_sync(win_)); }

  /// The most elements one MPI call moves (INT_MAX by default). Lowering it only serves to test
  /// the splitting of long transfers.
  void set_max_chunk(std::size_t elements) {
    if (elements == 0 || elements > static_cast<std::size_t>(INT_MAX))
      throw InvalidArgument("Window::set_max_chunk: " + std::to_string(elements) +
                            " is not in 1.." + std::to_string(INT_MAX));
    max_chunk_ = elements;
  }

 private:
  void swap(Window& other) noexcept {
    std::swap(comm_, other.comm_);
    std::swap(win_, other.win_);
    std::swap(base_, other.base_);
    std::swap(count_, other.count_);
    std::swap(counts_, other.counts_);
    std::swap(max_chunk_, other.max_chunk_);
    std::swap(exceptions_at_start_, other.exceptions_at_start_);
  }
  static void check_wide_compare_and_swap() {
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
    const char* flags = std::getenv("OMPI_MCA_btl_vader_flags");
    if (flags == nullptr || std::string(flags).find("fetching-atomics") != std::string::npos)
      throw Error(
          "Window::compare_and_swap: an 8-byte compare-and-swap crashes Open MPI 4.x's "
          "shared-memory transport (open-mpi/ompi#7967); use a 4-byte type or fetch_and_op, or "
          "run with OMPI_MCA_btl_vader_flags=send,put,get,inplace,atomics");
#endif
  }
  void check_target(int target, const char* what) const {
    if (target < 0 || static_cast<std::size_t>(target) >= counts_.size())
      throw InvalidArgument(std::string("Window::") + what + ": target rank " +
                            std::to_string(target) + " is not in a window of " +
                            std::to_string(counts_.size()) + " ranks");
  }
  void check_range(std::size_t n, int target, std::size_t offset, const char* what) const {
    check_target(target, what);
    const std::size_t size = counts_[static_cast<std::size_t>(target)];
    if (offset > size || n > size - offset)
      throw InvalidArgument(std::string("Window::") + what + ": elements [" +
                            std::to_string(offset) + ", " + std::to_string(offset + n) +
                            ") are outside rank " + std::to_string(target) + "'s " +
                            std::to_string(size) + " elements");
  }

  Comm comm_;
  MPI_Win win_ = MPI_WIN_NULL;
  T* base_ = nullptr;
  std::size_t count_ = 0;
  std::vector<std::size_t> counts_;
  std::size_t max_chunk_ = static_cast<std::size_t>(INT_MAX);
  int exceptions_at_start_ = 0;
};

}  // namespace cohort::mpi
