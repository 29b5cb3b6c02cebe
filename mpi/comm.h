#pragma once
// A communicator handle with the collectives Cohort uses.

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cohort/mpi/datatype.h"
#include "cohort/mpi/error.h"
#include "cohort/mpi/request.h"

namespace cohort::mpi {

namespace detail {

/// Calls fn(first, count) over [0, total) in pieces of at most `max_chunk` elements, so that no
/// single MPI call is given a count above what an int holds.
template <typename F>
void for_each_chunk(std::size_t total, std::size_t max_chunk, F&& fn) {
  for (std::size_t first = 0; first < total; first += max_chunk)
    fn(first, std::min(max_chunk, total - first));
}

}  // namespace detail

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
  /// Collective, non-blocking: the request completes once every rank has entered the barrier.
  /// Lets a rank wait for the others while sleeping instead of spinning in MPI_Barrier.
  Request ibarrier() const;

  /// Collective, blocking. In place: every rank's `data` becomes the reduction of all of them.
  template <typename T>
  void allreduce(std::span<T> data, Op op = Op::kSum) const {
    in_pieces(data, [&](std::span<T> piece) {
      COHORT_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, piece.data(), static_cast<int>(piece.size()),
                                    datatype<T>(), to_mpi(op), handle_));
    });
  }
  /// Collective, non-blocking: allreduce() that completes with the returned request; `data`
  /// must stay untouched until then. Progresses as the request is tested or waited for.
  template <typename T>
  Request iallreduce(std::span<T> data, Op op = Op::kSum) const {
    MPI_Request request = MPI_REQUEST_NULL;
    COHORT_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count_of(data.size(), "iallreduce"),
                                   datatype<T>(), to_mpi(op), handle_, &request));
    return Request(request);
  }
  /// Collective, non-blocking: allreduce_bf16() that completes with the returned request.
  Request iallreduce_bf16(std::span<std::uint16_t> data) const;
  /// Collective, blocking. In place: every rank's `data`, bfloat16 bit patterns
  /// (core/base/bfloat16.h), becomes their sum, each addition done in float and rounded back to
  /// bfloat16. Half the bytes of a float32 sum on the wire, at bfloat16's precision.
  void allreduce_bf16(std::span<std::uint16_t> data) const;
  /// Collective, blocking. The reduction of one value over all ranks.
  template <typename T>
  T allreduce(T value, Op op = Op::kSum) const {
    allreduce(std::span<T>(&value, 1), op);
    return value;
  }

  /// Collective, blocking. `data` on `root` is copied to every rank's `data` (same size everywhere).
  template <typename T>
  void bcast(std::span<T> data, int root) const {
    in_pieces(data, [&](std::span<T> piece) {
      COHORT_MPI_CALL(MPI_Bcast(piece.data(), static_cast<int>(piece.size()), datatype<T>(), root,
                                handle_));
    });
  }

  /// Collective, blocking. Every rank contributes `mine` (same size everywhere); the result holds
  /// rank 0's elements, then rank 1's, and so on.
  template <typename T>
  std::vector<T> allgather(std::span<const T> mine) const {
    std::vector<T> all(mine.size() * static_cast<std::size_t>(size()));
    const int count = count_of(mine.size(), "allgather");
    COHORT_MPI_CALL(MPI_Allgather(mine.data(), count, datatype<T>(), all.data(), count,
                                  datatype<T>(), handle_));
    return all;
  }
  /// Collective, blocking. One value per rank, in rank order.
  template <typename T>
  std::vector<T> allgather(const T& mine) const {
    return allgather(std::span<const T>(&mine, 1));
  }
  /// Collective, blocking. Like allgather, but each rank may contribute a different number of
  /// elements; the result holds one vector per rank, in rank order.
  template <typename T>
  std::vector<std::vector<T>> allgatherv(std::span<const T> mine) const {
    const std::vector<int> counts = allgather(count_of(mine.size(), "allgatherv"));
    std::vector<int> displacements(counts.size());
    std::size_t total = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      displacements[r] = count_of(total, "allgatherv");
      total += static_cast<std::size_t>(counts[r]);
    }
    std::vector<T> flat(total);
    COHORT_MPI_CALL(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), datatype<T>(),
                                   flat.data(), counts.data(), displacements.data(), datatype<T>(),
                                   handle_));
    std::vector<std::vector<T>> all(counts.size());
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const auto first = flat.begin() + displacements[r];
      all[r].assign(first, first + counts[r]);
    }
    return all;
  }
  /// Collective, blocking. One string per rank, in rank order.
  std::vector<std::string> allgather_strings(const std::string& mine) const;
  /// Collective, blocking. Returns `root`'s `text` on every rank (other ranks' `text` is unused).
  std::string bcast_string(const std::string& text, int root) const;

  /// Blocking point-to-point send of `data` to `dest` with `tag`.
  template <typename T>
  void send(std::span<const T> data, int dest, int tag) const {
    COHORT_MPI_CALL(MPI_Send(data.data(), count_of(data.size(), "send"), datatype<T>(), dest, tag,
                             handle_));
  }
  /// Blocking receive into `data` (at most data.size() elements) from `source` (or
  /// MPI_ANY_SOURCE) with `tag` (or MPI_ANY_TAG). Returns the status.
  template <typename T>
  MPI_Status recv(std::span<T> data, int source, int tag) const {
    MPI_Status status;
    COHORT_MPI_CALL(MPI_Recv(data.data(), count_of(data.size(), "recv"), datatype<T>(), source,
                             tag, handle_, &status));
    return status;
  }
  /// Non-blocking send; `data` must stay alive and unchanged until the request completes.
  template <typename T>
  Request isend(std::span<const T> data, int dest, int tag) const {
    MPI_Request request = MPI_REQUEST_NULL;
    COHORT_MPI_CALL(MPI_Isend(data.data(), count_of(data.size(), "isend"), datatype<T>(), dest,
                              tag, handle_, &request));
    return Request(request);
  }
  /// Non-blocking receive; `data` must stay alive until the request completes or is cancelled.
  template <typename T>
  Request irecv(std::span<T> data, int source, int tag) const {
    MPI_Request request = MPI_REQUEST_NULL;
    COHORT_MPI_CALL(MPI_Irecv(data.data(), count_of(data.size(), "irecv"), datatype<T>(), source,
                              tag, handle_, &request));
    return Request(request);
  }
  /// Non-blocking. The status of a message from `source` with `tag` that is waiting to be
  /// received, if there is one.
  std::optional<MPI_Status> iprobe(int source, int tag) const;

  /// Calls f on consecutive pieces of `data` of at most INT_MAX elements (MPI counts are ints),
  /// for the element-wise collectives; not at all for empty data (the same on every rank).
  template <typename T, typename F>
  static void in_pieces(std::span<T> data, F&& f) {
    detail::for_each_chunk(data.size(), static_cast<std::size_t>(INT_MAX),
                           [&](std::size_t first, std::size_t n) { f(data.subspan(first, n)); });
  }
  /// `n` as an MPI count; throws InvalidArgument naming `what` when it exceeds INT_MAX.
  static int count_of(std::size_t n, const char* what) {
    if (n > static_cast<std::size_t>(INT_MAX))
      throw InvalidArgument(std::string(what) + ": " + std::to_string(n) +
                            " elements exceed the MPI count limit of " + std::to_string(INT_MAX));
    return static_cast<int>(n);
  }

 private:
  Comm(MPI_Comm handle, bool owned) : handle_(handle), owned_(owned) {}
  void release() noexcept;

  MPI_Comm handle_ = MPI_COMM_NULL;
  bool owned_ = false;
};

}  // namespace cohort::mpi
