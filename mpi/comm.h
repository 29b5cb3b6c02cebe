#pragma once
// A communicator handle with the collectives Cohort uses.

#include <mpi.h>

#include <span>
#include <vector>

#include "cohort/mpi/datatype.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi {

/// Owns an MPI communicator (or borrows WORLD/SELF, which are never freed).
///
/// Move-only: a move leaves the source null. Copying a communicator would be a hidden collective
/// (MPI_Comm_dup); call dup() explicitly instead. Every communicator made here returns errors
/// (MPI_ERRORS_RETURN), and every failed call throws MpiError. Methods marked "collective" must be
/// called by every rank of the communicator, in the same order. Not thread-safe: call from the
/// main thread only (the library is initialised with MPI_THREAD_FUNNELED).
class Comm {
 public:
  /// A null communicator.
  Comm() = default;
  /// The world communicator (borrowed).
  static Comm world();
  /// The self communicator (borrowed).
  static Comm self();
  /// Takes ownership of `handle`, which must not be WORLD or SELF.
  static Comm adopt(MPI_Comm handle);

  Comm(Comm&& other) noexcept;
  Comm& operator=(Comm&& other) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm();

  MPI_Comm get() const { return handle_; }
  bool is_null() const { return handle_ == MPI_COMM_NULL; }
  int rank() const;
  int size() const;

  /// Collective. Ranks with the same color form a communicator, ordered by key. A rank passing
  /// MPI_UNDEFINED as color gets a null Comm.
  Comm split(int color, int key) const;
  /// Collective. Splits into node-local communicators (MPI_COMM_TYPE_SHARED).
  Comm split_shared() const;
  /// Collective. A duplicate with its own context.
  Comm dup() const;

  /// Collective, blocking.
  void barrier() const;

  /// Collective, blocking. In place: every rank's `data` becomes the reduction of all of them.
  template <typename T>
  void allreduce(std::span<T> data, Op op = Op::kSum) const {
    COHORT_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()),
                                  datatype<T>(), to_mpi(op), handle_));
  }
  /// Collective, blocking. The reduction of one value over all ranks.
  template <typename T>
  T allreduce(T value, Op op = Op::kSum) const {
    allreduce(std::span<T>(&value, 1), op);
    return value;
  }

  /// Collective, blocking. `data` on `root` is copied to every rank's `data` (same size everywhere).
  template <typename T>
  void bcast(std::span<T> data, int root) const {
    COHORT_MPI_CALL(MPI_Bcast(data.data(), static_cast<int>(data.size()), datatype<T>(), root,
                              handle_));
  }

  /// Collective, blocking. Every rank contributes `mine` (same size everywhere); the result holds
  /// rank 0's elements, then rank 1's, and so on.
  template <typename T>
  std::vector<T> allgather(std::span<const T> mine) const {
    std::vector<T> all(mine.size() * static_cast<std::size_t>(size()));
    COHORT_MPI_CALL(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), datatype<T>(),
                                  all.data(), static_cast<int>(mine.size()), datatype<T>(),
                                  handle_));
    return all;
  }
  /// Collective, blocking. One value per rank, in rank order.
  template <typename T>
  std::vector<T> allgather(const T& mine) const {
    return allgather(std::span<const T>(&mine, 1));
  }

 private:
  Comm(MPI_Comm handle, bool owned) : handle_(handle), owned_(owned) {}
  void release() noexcept;

  MPI_Comm handle_ = MPI_COMM_NULL;
  bool owned_ = false;
};

}  // namespace cohort::mpi
