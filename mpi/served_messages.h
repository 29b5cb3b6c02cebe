#pragma once
// The messages of a window served by messages (mpi::Window, window.h): an origin's requests and
// a target's answers.

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/core/base/bfloat16.h"
#include "cohort/mpi/comm.h"
#include "cohort/mpi/datatype.h"
#include "cohort/mpi/error.h"

namespace cohort::mpi::detail {

/// What a request asks of its target.
enum ServedRequest : std::int64_t {
  kGetRequest,
  kAccumulateRequest,
  kFetchAndOpRequest,
  kCompareAndSwapRequest,
  kFetchAndFillRequest,
  kAccumulateBf16Request,
  kTakeBf16Request,
};

/// A served window's wire, for mpi::Window alone. A request is a header of six int64 (kind,
/// offset, count, op, two operands' bits), then for an accumulate its elements; the target
/// answers a get or fetch with the elements, an accumulate with an empty acknowledgement, and
/// applies each request whole, in the order one origin issued them. Tags keep the three apart on
/// the window's own communicator. Not thread-safe.
template <typename T>
class ServedMessages {
 public:
  using Header = std::array<std::int64_t, 6>;

  static std::int64_t op_code(Op op) { return static_cast<std::int64_t>(op); }
  static Header header(std::int64_t kind, std::size_t offset, std::size_t count, std::int64_t op = 0,
                       std::int64_t a = 0, std::int64_t b = 0) {
    return {kind, static_cast<std::int64_t>(offset), static_cast<std::int64_t>(count), op, a, b};
  }
  /// A value's bits, as a header carries an operand.
  static std::int64_t bits(T value) {
    static_assert(sizeof(T) <= sizeof(std::int64_t));
    std::int64_t out = 0;
    std::memcpy(&out, &value, sizeof(T));
    return out;
  }

  /// Origin side: sends one request to `target`; `payload` (count elements, T's unless
  /// `payload_type` says otherwise) follows it, `reply` (count elements of T's or `reply_type`,
  /// or nothing for an acknowledgement) is received into. Completes at complete().
  void request(const Comm& comm, int target, const Header& h, const void* payload, void* reply,
               MPI_Datatype payload_type = datatype<T>(), MPI_Datatype reply_type = datatype<T>()) {
    const int n = static_cast<int>(h[2]);
    headers_.push_back(h);
    pending_.emplace_back();
    COHORT_MPI_CALL(MPI_Isend(headers_.back().data(), kHeaderSize, MPI_INT64_T, target, kRequestTag,
                              comm.get(), &pending_.back()));
    if (payload != nullptr) {
      pending_.emplace_back();
      COHORT_MPI_CALL(MPI_Isend(payload, n, payload_type, target, kPayloadTag, comm.get(),
                                &pending_.back()));
    }
    pending_.emplace_back();
    COHORT_MPI_CALL(MPI_Irecv(reply, reply != nullptr ? n : 0, reply_type, target, kReplyTag,
                              comm.get(), &pending_.back()));
  }
  /// Blocking. Completes every request in flight; false when there was none.
  bool complete() {
    if (pending_.empty()) return false;
    COHORT_MPI_CALL(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(),
                                MPI_STATUSES_IGNORE));
    pending_.clear();
    headers_.clear();
    return true;
  }
  /// Never blocks: moves the requests in flight on (MPI progresses messages inside MPI calls).
  void progress() {
    if (pending_.empty()) return;
    int done = 0;
    COHORT_MPI_CALL(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done,
                                MPI_STATUSES_IGNORE));
    if (done) pending_.clear(), headers_.clear();
  }

  /// Target side: answers every request that has arrived, applying it to this rank's `count`
  /// elements at `base`, and returns how many (0 at once when there are none). Throws MpiError,
  /// or Error on a request outside the elements or of no known kind.
  int serve(const Comm& comm, T* base, std::size_t count) {
    int answered = 0;
    for (;; ++answered) {
      int arrived = 0;
      MPI_Status status;
      COHORT_MPI_CALL(MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, comm.get(), &arrived, &status));
      if (!arrived) return answered;
      Header h{};
      COHORT_MPI_CALL(MPI_Recv(h.data(), kHeaderSize, MPI_INT64_T, status.MPI_SOURCE, kRequestTag,
                               comm.get(), MPI_STATUS_IGNORE));
      answer(comm, base, count, h, status.MPI_SOURCE);
    }
  }

  void swap(ServedMessages& other) noexcept {
    std::swap(scratch_, other.scratch_);
    std::swap(wire_, other.wire_);
    std::swap(headers_, other.headers_);
    std::swap(pending_, other.pending_);
  }

 private:
  static constexpr int kHeaderSize = 6;
  static constexpr int kRequestTag = 1, kPayloadTag = 2, kReplyTag = 3;

  static T value_of(std::int64_t stored) {
    T out{};
    std::memcpy(&out, &stored, sizeof(T));
    return out;
  }
  static T combine(T old, T operand, Op op) {
    switch (op) {
      case Op::kSum: return old + operand;
      case Op::kMax: return std::max(old, operand);
      case Op::kMin: return std::min(old, operand);
      case Op::kReplace: return operand;
      case Op::kNoOp: return old;
    }
    return old;
  }

  // Applies one request from `origin` to the `size` elements at `base`, and answers it.
  void answer(const Comm& comm, T* base, std::size_t size, const Header& h, int origin) {
    const auto offset = static_cast<std::size_t>(h[1]);
    const auto n = static_cast<std::size_t>(h[2]);
    if (h[1] < 0 || h[2] < 0 || offset > size || n > size - offset)
      throw Error("Window::serve: rank " + std::to_string(origin) + " asked for elements [" +
                  std::to_string(h[1]) + ", " + std::to_string(h[1] + h[2]) + ") of " +
                  std::to_string(size));
    T* at = base + offset;
    const int count = static_cast<int>(n);
    const auto op = static_cast<Op>(h[3]);
    switch (h[0]) {
      case kGetRequest:
        COHORT_MPI_CALL(MPI_Send(at, count, datatype<T>(), origin, kReplyTag, comm.get()));
        return;
      case kAccumulateRequest:
        if (op == Op::kReplace) {
          COHORT_MPI_CALL(MPI_Recv(at, count, datatype<T>(), origin, kPayloadTag, comm.get(),
                                   MPI_STATUS_IGNORE));
        } else {
          scratch_.resize(n);
          COHORT_MPI_CALL(MPI_Recv(scratch_.data(), count, datatype<T>(), origin, kPayloadTag,
                                   comm.get(), MPI_STATUS_IGNORE));
          if (op == Op::kSum) {
            for (std::size_t i = 0; i < n; ++i) at[i] += scratch_[i];
          } else {
            for (std::size_t i = 0; i < n; ++i) at[i] = combine(at[i], scratch_[i], op);
          }
        }
        COHORT_MPI_CALL(MPI_Send(nullptr, 0, datatype<T>(), origin, kReplyTag, comm.get()));
        return;
      case kAccumulateBf16Request:
        if constexpr (std::is_same_v<T, float>) {
          wire_.resize(n);
          COHORT_MPI_CALL(MPI_Recv(wire_.data(), count, MPI_UINT16_T, origin, kPayloadTag,
                                   comm.get(), MPI_STATUS_IGNORE));
          for (std::size_t i = 0; i < n; ++i) at[i] += bf16::to_float(wire_[i]);
          COHORT_MPI_CALL(MPI_Send(nullptr, 0, datatype<T>(), origin, kReplyTag, comm.get()));
          return;
        }
        break;
      case kTakeBf16Request:
        if constexpr (std::is_same_v<T, float>) {
          wire_.resize(n);
          for (std::size_t i = 0; i < n; ++i) {
            wire_[i] = bf16::from_float(at[i]);
            at[i] -= bf16::to_float(wire_[i]);
          }
          COHORT_MPI_CALL(MPI_Send(wire_.data(), count, MPI_UINT16_T, origin, kReplyTag,
                                   comm.get()));
          return;
        }
        break;
      case kFetchAndFillRequest:
        COHORT_MPI_CALL(MPI_Send(at, count, datatype<T>(), origin, kReplyTag, comm.get()));
        std::fill_n(at, n, value_of(h[4]));
        return;
      case kFetchAndOpRequest: {
        const T old = *at;
        *at = combine(old, value_of(h[4]), op);
        COHORT_MPI_CALL(MPI_Send(&old, 1, datatype<T>(), origin, kReplyTag, comm.get()));
        return;
      }
      case kCompareAndSwapRequest: {
        const T old = *at;
        if (old == value_of(h[5])) *at = value_of(h[4]);
        COHORT_MPI_CALL(MPI_Send(&old, 1, datatype<T>(), origin, kReplyTag, comm.get()));
        return;
      }
      default:
        break;
    }
    throw Error("Window::serve: rank " + std::to_string(origin) + " sent request kind " +
                std::to_string(h[0]));
  }

  std::vector<T> scratch_;              // an accumulate's incoming elements
  std::vector<std::uint16_t> wire_;     // an accumulate_bf16's incoming elements
  std::deque<Header> headers_;          // requests in flight (stable addresses)
  std::vector<MPI_Request> pending_;    // their sends and receives
};

}  // namespace cohort::mpi::detail
