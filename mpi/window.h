#pragma once
// One-sided communication: a window of T elements on every rank of a communicator.

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/mpi/comm.h"
#include "cohort/mpi/datatype.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/error.h"
#include "cohort/mpi/served_messages.h"

namespace cohort::mpi {

/// Passive-target lock kinds (MPI_LOCK_SHARED, MPI_LOCK_EXCLUSIVE).
enum class LockType { kShared, kExclusive };

namespace detail {

/// Collective over `comm` (two ranks or more), on a window just made: whether a passive-target
/// transfer completes while its target makes no MPI call. True of shared memory and RDMA; false
/// where the transport moves transfers as messages that the target's own MPI calls must answer
/// (Open MPI's osc pt2pt, for one). One rank puts a byte at displacement `probe_disp` of rank 0,
/// memory no element uses, whose own address of it is `probe_byte`; rank 0 watches that byte,
/// without calling MPI, for up to a second. The rank that puts is on another node than rank 0
/// where the processes span nodes (the transport between nodes is the one that may need the
/// target), else rank 1. The same answer on every rank; asked once per set of
/// processes, since MPI chooses a window's transport by the processes it joins.
bool transfers_need_no_target(MPI_Win win, const Comm& comm, MPI_Aint probe_disp,
                              const volatile unsigned char* probe_byte);

}  // namespace detail

/// A window over memory the window owns (MPI_Win_allocate: on shared memory, accumulate runs ~8x
/// faster than on MPI_Win_create memory). Each rank holds `local_count` elements of T, zeroed at
/// creation and starting on a kAlignment-byte boundary; other ranks address them by (target
/// rank, element offset).
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
///
/// Where MPI offers no one-sided transport (Open MPI over TCP alone: its only one-sided component
/// for that needs network atomics, and MPI_Win_allocate fails), where the window MPI made moves a
/// transfer only when the target calls MPI (Open MPI's osc pt2pt: found at creation by a put that
/// must land while the target makes no MPI call; COHORT_ONE_SIDED=1 skips that test), or where
/// COHORT_ONE_SIDED=0 is set, the window is *served*: each rank keeps its elements in plain
/// memory, and the transfers become request messages (served_messages.h) that the target answers
/// from serve() (a ps task calls it from Server::join()). The interface and the completion rules stay the same; each operation is
/// applied whole and atomically at the target, in the order one origin issued them. An exclusive
/// lock excludes nothing there: use compare_and_swap() for a read-modify-write. served() and
/// transport() say which path a window took.
template <typename T>
class Window {
 public:
  /// Every rank's elements start on an address that is a multiple of this many bytes.
  static constexpr std::size_t kAlignment = 64;

  /// A scoped passive-target epoch on one target (MPI_Win_lock) or on all (MPI_Win_lock_all).
  /// Move-only; the destructor unlocks, also while an exception unwinds (errors ignored there).
  class LockGuard {
   public:
    LockGuard() = default;
    LockGuard(LockGuard&& other) noexcept
        : window_(std::exchange(other.window_, nullptr)), target_(other.target_) {}
    LockGuard& operator=(LockGuard&& other) noexcept {
      if (this != &other) {
        release();
        window_ = std::exchange(other.window_, nullptr);
        target_ = other.target_;
      }
      return *this;
    }
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;
    ~LockGuard() { release(); }

    /// True until unlock() or destruction.
    bool locked() const { return window_ != nullptr; }
    /// Blocking. Ends the epoch now (every transfer in it is complete); throws MpiError.
    void unlock() {
      if (!locked()) return;
      std::exchange(window_, nullptr)->end_epoch(target_);
    }

   private:
    friend class Window;
    static constexpr int kAll = -1;
    LockGuard(Window* window, int target) : window_(window), target_(target) {}
    void release() noexcept {
      if (!locked() || !Environment::active()) return;
      try {
        std::exchange(window_, nullptr)->end_epoch(target_);
      } catch (...) {  // errors ignored while unwinding or destroying
      }
    }

    Window* window_ = nullptr;  // the window must not move while locked
    int target_ = kAll;
  };

  /// A null window.
  Window() = default;

  /// Collective over `comm`. Allocates `local_count` zeroed elements on this rank (counts may
  /// differ between ranks, and may be 0).
  Window(const Comm& comm, std::size_t local_count)
      : comm_(comm.dup()), exceptions_at_start_(std::uncaught_exceptions()) {
    static_assert(kAlignment % sizeof(T) == 0, "Window: elements must tile the alignment");
    // Room to start the elements on an aligned address, wherever MPI puts the memory.
    const std::size_t padded = local_count + kAlignment / sizeof(T);
    const std::size_t bytes = padded * sizeof(T);
    if (padded < local_count || bytes / padded != sizeof(T))
      throw InvalidArgument("Window: " + std::to_string(local_count) + " elements overflow");
    void* base = nullptr;
    int one_sided = 0;
    const char* env = std::getenv("COHORT_ONE_SIDED");
    const std::string forced = env != nullptr ? env : "";
    if (forced == "0") {
      transport_ = "served by messages (COHORT_ONE_SIDED=0)";
    } else {
      try {
        COHORT_MPI_CALL(MPI_Win_allocate(static_cast<MPI_Aint>(bytes), static_cast<int>(sizeof(T)),
                                         MPI_INFO_NULL, comm_.get(), &base, &win_));
        one_sided = 1;
      } catch (const MpiError& e) {
        win_ = MPI_WIN_NULL;  // MPI leaves it undefined on failure
        char text[MPI_MAX_ERROR_STRING] = "";
        int length = 0;
        MPI_Error_string(e.code(), text, &length);
        transport_ = std::string("served by messages (MPI_Win_allocate refused a window: ") + text + ")";
      }
      if (one_sided) COHORT_MPI_CALL(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
    }
    // Every rank must take the same path: if any could not make the window, none uses it.
    int everywhere = 0;
    COHORT_MPI_CALL(MPI_Allreduce(&one_sided, &everywhere, 1, MPI_INT, MPI_LAND, comm_.get()));
    if (everywhere == 0)
      base = use_plain_memory(padded, one_sided ? "another rank has no one-sided transport" : "");
    place(base, local_count);
    // A window MPI made may still move a transfer only when its target calls MPI (Open MPI's osc
    // pt2pt over TCP, for one): a ps that computes or sleeps would stall every worker. Such a
    // window is served instead, where the ps answers as requests arrive. COHORT_ONE_SIDED=1
    // keeps the window without asking.
    if (!served_ && comm_.size() > 1 && forced != "1" &&
        !detail::transfers_need_no_target(win_, comm_, disp(0, counts_[0]),
                                          reinterpret_cast<unsigned char*>(base_ + count_))) {
      base = use_plain_memory(padded, "MPI's window moves a transfer only when its target calls MPI");
      place(base, local_count);
    }
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

  /// After an error on this rank alone: the destruction takes no collective step, the window
  /// left for MPI_Finalize or MPI_Abort to reclaim (as while an exception unwinds).
  void abandon() noexcept { win_ = MPI_WIN_NULL; }

  bool is_null() const { return win_ == MPI_WIN_NULL && !served_; }
  /// The MPI window; MPI_WIN_NULL when served().
  MPI_Win get() const { return win_; }
  /// True when the transfers are request messages answered by the targets' serve().
  bool served() const { return served_; }
  /// "one-sided (MPI_Win_allocate)", or "served by messages (...)" with the reason.
  const std::string& transport() const { return transport_; }
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
    if (!served_) COHORT_MPI_CALL(MPI_Win_lock(kind, target, 0, win_));
    ++epochs_;
    return LockGuard(this, target);
  }
  /// Opens a shared epoch on every rank of the window.
  [[nodiscard]] LockGuard lock_all() {
    if (!served_) COHORT_MPI_CALL(MPI_Win_lock_all(0, win_));
    ++epochs_;
    return LockGuard(this, LockGuard::kAll);
  }

  /// Non-blocking (completes at flush/unlock). Writes `src` to target's elements from `offset`.
  void put(std::span<const T> src, int target, std::size_t offset) {
    check_range(src.size(), target, offset, "put");
    detail::for_each_chunk(src.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      if (served_) return request(target, header(detail::kAccumulateRequest, offset + first, n, op_code(Op::kReplace)),
                                  src.data() + first, nullptr);
      COHORT_MPI_CALL(MPI_Put(src.data() + first, static_cast<int>(n), datatype<T>(), target,
                              disp(target, offset + first), static_cast<int>(n),
                              datatype<T>(), win_));
    });
  }
  /// Non-blocking (completes at flush/unlock). Sets `count` of target's elements from `offset`
  /// to `value`: puts from one buffer of 64 KB of copies, which stays in the cache, instead of
  /// reading `count` source elements.
  void fill(std::size_t count, T value, int target, std::size_t offset) {
    check_range(count, target, offset, "fill");
    const std::size_t chunk = std::min({count, max_chunk_, kFillBytes / sizeof(T)});
    fill_buffer(chunk, value);
    detail::for_each_chunk(count, chunk, [&](std::size_t first, std::size_t n) {
      if (served_) return request(target, header(detail::kAccumulateRequest, offset + first, n, op_code(Op::kReplace)),
                                  fill_.data(), nullptr);
      COHORT_MPI_CALL(MPI_Put(fill_.data(), static_cast<int>(n), datatype<T>(), target,
                              disp(target, offset + first), static_cast<int>(n), datatype<T>(),
                              win_));
    });
  }
  /// Non-blocking (`dst` is valid after flush/unlock). Reads target's elements from `offset`.
  void get(std::span<T> dst, int target, std::size_t offset) {
    check_range(dst.size(), target, offset, "get");
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      if (served_) return request(target, header(detail::kGetRequest, offset + first, n), nullptr, dst.data() + first);
      COHORT_MPI_CALL(MPI_Get(dst.data() + first, static_cast<int>(n), datatype<T>(), target,
                              disp(target, offset + first), static_cast<int>(n),
                              datatype<T>(), win_));
    });
  }
  /// Non-blocking. Combines `src` into target's elements from `offset`; element-wise atomic
  /// against other accumulates with the same op, so concurrent sums from many ranks lose nothing.
  void accumulate(std::span<const T> src, int target, std::size_t offset, Op op = Op::kSum) {
    check_range(src.size(), target, offset, "accumulate");
    detail::for_each_chunk(src.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      if (served_) return request(target, header(detail::kAccumulateRequest, offset + first, n, op_code(op)),
                                  src.data() + first, nullptr);
      COHORT_MPI_CALL(MPI_Accumulate(src.data() + first, static_cast<int>(n), datatype<T>(), target,
                                     disp(target, offset + first), static_cast<int>(n),
                                     datatype<T>(), to_mpi(op), win_));
    });
  }
  /// Non-blocking. Adds `src`, bfloat16 bit patterns (core/base/bfloat16.h), to target's float
  /// elements from `offset`: half the bytes of accumulate() on the wire, applied whole and in
  /// order like it. Served windows only, where the target converts as it adds (MPI_Accumulate
  /// has no such operation): Error on a one-sided window.
  void accumulate_bf16(std::span<const std::uint16_t> src, int target, std::size_t offset)
    requires std::is_same_v<T, float>
  {
    check_range(src.size(), target, offset, "accumulate_bf16");
    check_served("accumulate_bf16", "MPI_Accumulate adds float32 only");
    detail::for_each_chunk(src.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      request(target, header(detail::kAccumulateBf16Request, offset + first, n), src.data() + first,
              nullptr, MPI_UINT16_T);
    });
  }
  /// Blocking until the value is back (flushes `target`). Atomically combines `operand` into one
  /// element and returns the element's previous value. Op::kNoOp reads, Op::kReplace swaps.
  T fetch_and_op(T operand, int target, std::size_t offset, Op op = Op::kSum) {
    T result{};
    fetch_and_op(operand, result, target, offset, op);
    flush(target);
    return result;
  }

  /// Non-blocking (`result` is set at flush/unlock): the same operation, completed with the
  /// epoch's other transfers, so it costs no round trip of its own.
  void fetch_and_op(T operand, T& result, int target, std::size_t offset, Op op) {
    check_range(1, target, offset, "fetch_and_op");
    if (served_)
      return request(target, header(detail::kFetchAndOpRequest, offset, 1, op_code(op), bits(operand)),
                     nullptr, &result);
    operands_.push_back(operand);  // MPI reads it when the operation completes
    COHORT_MPI_CALL(MPI_Fetch_and_op(&operands_.back(), &result, datatype<T>(), target,
                                     disp(target, offset), to_mpi(op), win_));
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
    T result{};
    if (served_) {
      request(target, header(detail::kCompareAndSwapRequest, offset, 1, 0, bits(desired), bits(expected)), nullptr,
              &result);
      complete();
      return result;
    }
    if constexpr (sizeof(T) == 8) check_wide_compare_and_swap();
    COHORT_MPI_CALL(MPI_Compare_and_swap(&desired, &expected, &result, datatype<T>(), target,
                                         disp(target, offset), win_));
    COHORT_MPI_CALL(MPI_Win_flush(target, win_));
    return result;
  }
  /// Non-blocking (`dst` is valid after flush/unlock). Like get(), but each element is read
  /// atomically with respect to concurrent accumulates and fetch_and_ops (MPI_Get_accumulate with
  /// MPI_NO_OP), so a counter being incremented is never read torn.
  void get_atomic(std::span<T> dst, int target, std::size_t offset) {
    check_range(dst.size(), target, offset, "get_atomic");
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      if (served_) return request(target, header(detail::kGetRequest, offset + first, n), nullptr, dst.data() + first);
      COHORT_MPI_CALL(MPI_Get_accumulate(nullptr, 0, datatype<T>(), dst.data() + first,
                                         static_cast<int>(n), datatype<T>(), target,
                                         disp(target, offset + first), static_cast<int>(n),
                                         datatype<T>(), MPI_NO_OP, win_));
    });
  }

  /// Non-blocking (`dst` is valid after flush/unlock). Reads target's elements from `offset`
  /// into `dst` and sets each to `value`, element-wise atomically (MPI_Get_accumulate with
  /// MPI_REPLACE): a sum that others accumulate into is taken and reset in one transfer, and no
  /// accumulate lands between the read and the reset. Served windows send no elements for it.
  void fetch_and_fill(std::span<T> dst, T value, int target, std::size_t offset) {
    check_range(dst.size(), target, offset, "fetch_and_fill");
    if (!served_) fill_buffer(std::min(dst.size(), max_chunk_), value);
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      if (served_)
        return request(target, header(detail::kFetchAndFillRequest, offset + first, n, 0, bits(value)),
                       nullptr, dst.data() + first);
      COHORT_MPI_CALL(MPI_Get_accumulate(fill_.data(), static_cast<int>(n), datatype<T>(),
                                         dst.data() + first, static_cast<int>(n), datatype<T>(),
                                         target, disp(target, offset + first),
                                         static_cast<int>(n), datatype<T>(), MPI_REPLACE, win_));
    });
  }

  /// Non-blocking (`dst` is valid after flush/unlock). Takes target's float elements from
  /// `offset` as bfloat16 (bit patterns, half the bytes of fetch_and_fill on the wire) and
  /// leaves in their place what the rounding lost, so that nothing is lost, only delayed (error
  /// feedback, at the target). Atomic per request like fetch_and_fill. Served windows only (the
  /// target rounds): Error on a one-sided window.
  void take_bf16(std::span<std::uint16_t> dst, int target, std::size_t offset)
    requires std::is_same_v<T, float>
  {
    check_range(dst.size(), target, offset, "take_bf16");
    check_served("take_bf16", "MPI has no bfloat16 operation");
    detail::for_each_chunk(dst.size(), max_chunk_, [&](std::size_t first, std::size_t n) {
      request(target, header(detail::kTakeBf16Request, offset + first, n), nullptr, dst.data() + first,
              MPI_UINT16_T, MPI_UINT16_T);
    });
  }

  /// Orders this epoch's transfers to `target`: those made after this call take effect there
  /// after those made before it. MPI orders accumulates only to the same elements, so on
  /// one-sided windows this completes the earlier ones (MPI_Win_flush, a round trip); a served
  /// window applies each origin's requests in the order they were made, and it costs nothing.
  /// Several dependent writes (a value, then the flag that publishes it) can so end in one round
  /// trip where the transport allows.
  void order(int target) {
    check_target(target, "order");
    if (!served_) COHORT_MPI_CALL(MPI_Win_flush(target, win_));
  }

  /// Blocking. Completes every transfer to `target` in the current epoch.
  void flush(int target) {
    check_target(target, "flush");
    if (served_) return complete();
    COHORT_MPI_CALL(MPI_Win_flush(target, win_));
  }
  /// Blocking. Completes every transfer in the current epochs.
  void flush_all() {
    if (served_) return complete();
    COHORT_MPI_CALL(MPI_Win_flush_all(win_));
  }
  /// Never blocks. Moves this rank's transfers in flight on where the window is served: MPI
  /// progresses their messages only inside MPI calls, so an origin that computes between
  /// transfers calls this now and then. Free on one-sided windows.
  void progress() {
    if (served_) messages_.progress();
  }
  /// Synchronises this rank's view of its local memory with the window (MPI_Win_sync); call it
  /// inside an epoch on this rank before reading local() that others have written.
  void sync() {
    if (!served_) COHORT_MPI_CALL(MPI_Win_sync(win_));
  }

  /// Served windows: answers every request for this rank's elements that has arrived, and
  /// returns how many (0 at once when there are none, and always on one-sided windows). A rank
  /// others transfer to must call it until they are done. Throws MpiError, or Error on a request
  /// outside this rank's elements.
  int serve() { return served_ ? messages_.serve(comm_, base_, count_) : 0; }

  /// The most elements one MPI call moves (INT_MAX by default). Lowering it only serves to test
  /// the splitting of long transfers.
  void set_max_chunk(std::size_t elements) {
    if (elements == 0 || elements > static_cast<std::size_t>(INT_MAX))
      throw InvalidArgument("Window::set_max_chunk: " + std::to_string(elements) +
                            " is not in 1.." + std::to_string(INT_MAX));
    max_chunk_ = elements;
  }

 private:
  using Messages = detail::ServedMessages<T>;
  static std::int64_t op_code(Op op) { return Messages::op_code(op); }
  static typename Messages::Header header(std::int64_t kind, std::size_t offset, std::size_t count,
                                          std::int64_t op = 0, std::int64_t a = 0,
                                          std::int64_t b = 0) {
    return Messages::header(kind, offset, count, op, a, b);
  }
  static std::int64_t bits(T value) { return Messages::bits(value); }
  // A served transfer: one request to `target` (ServedMessages::request).
  void request(int target, const typename Messages::Header& h, const void* payload, void* reply,
               MPI_Datatype payload_type = datatype<T>(), MPI_Datatype reply_type = datatype<T>()) {
    messages_.request(comm_, target, h, payload, reply, payload_type, reply_type);
  }
  // fill() and one-sided fetch_and_fill: a buffer of `n` copies of `value` for MPI to read
  // from. A buffer an earlier call may still be reading is kept until the epoch's transfers
  // complete.
  void fill_buffer(std::size_t n, T value) {
    if (fill_.size() >= n && (n == 0 || fill_.front() == value)) return;
    if (!fill_.empty()) old_fills_.push_back(std::move(fill_));
    fill_.assign(n, value);
  }
  void complete() {
    if (messages_.complete()) old_fills_.clear();
  }
  void end_epoch(int target) {
    --epochs_;
    if (served_) return complete();
    if (target == LockGuard::kAll)
      COHORT_MPI_CALL(MPI_Win_unlock_all(win_));
    else
      COHORT_MPI_CALL(MPI_Win_unlock(target, win_));
    if (epochs_ == 0) {  // every transfer has completed
      old_fills_.clear();
      operands_.clear();
    }
  }

  // Makes this a served window over plain memory of `padded` elements, freeing the MPI window
  // if there is one (collective then); `reason`, if given, goes into transport().
  void* use_plain_memory(std::size_t padded, const std::string& reason) {
    if (win_ != MPI_WIN_NULL) COHORT_MPI_CALL(MPI_Win_free(&win_));
    if (!reason.empty()) transport_ = "served by messages (" + reason + ")";
    served_ = true;
    plain_.assign(padded, T{});
    return plain_.data();
  }
  // Collective. Starts the elements kAlignment-aligned in the memory at `base` (room for that,
  // and at least one element more, is there), zeroes them and the element after them (a
  // transport probe's target), and learns every rank's count and shift. Besides vector loads at
  // the target, the alignment keeps copies fast: Open MPI 4.1 on one node (osc rdma over the
  // shared-memory transport) moved a 100,000-float get 13x slower when the destination's address
  // was 4 to 12 bytes past the source's, modulo 4 KB (memcpy's 4K aliasing), and its windows
  // start 8 bytes into a page.
  void place(void* base, std::size_t local_count) {
    const auto address = reinterpret_cast<std::uintptr_t>(base);
    if (address % sizeof(T) != 0)
      throw Error("Window: MPI returned memory not aligned for its elements");
    const std::size_t shift = (kAlignment - address % kAlignment) % kAlignment / sizeof(T);
    base_ = static_cast<T*>(base) + shift;
    count_ = local_count;
    std::fill_n(base_, count_ + 1, T{});
    // The gather doubles as the barrier that keeps anyone from touching memory still being zeroed.
    const std::vector<std::uint64_t> counts = comm_.allgather(static_cast<std::uint64_t>(count_));
    counts_.assign(counts.begin(), counts.end());
    const std::vector<std::uint64_t> shifts = comm_.allgather(static_cast<std::uint64_t>(shift));
    shifts_.assign(shifts.begin(), shifts.end());
  }

  // MPI's displacement of `target`'s element `offset` (its elements start `shift` in).
  MPI_Aint disp(int target, std::size_t offset) const {
    return static_cast<MPI_Aint>(offset + shifts_[static_cast<std::size_t>(target)]);
  }

  void swap(Window& other) noexcept {
    std::swap(served_, other.served_);
    std::swap(transport_, other.transport_);
    std::swap(plain_, other.plain_);
    messages_.swap(other.messages_);
    std::swap(fill_, other.fill_);
    std::swap(old_fills_, other.old_fills_);
    std::swap(operands_, other.operands_);
    std::swap(epochs_, other.epochs_);
    std::swap(comm_, other.comm_);
    std::swap(win_, other.win_);
    std::swap(base_, other.base_);
    std::swap(count_, other.count_);
    std::swap(counts_, other.counts_);
    std::swap(shifts_, other.shifts_);
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
  // The bfloat16 transfers need a target that converts: a served window.
  void check_served(const char* what, const char* why) const {
    if (!served_)
      throw Error(std::string("Window::") + what + ": this window is one-sided (" + transport_ +
                  "), where " + why);
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
  std::vector<std::size_t> shifts_;  // where each rank's elements start in its MPI memory
  std::size_t max_chunk_ = static_cast<std::size_t>(INT_MAX);
  int exceptions_at_start_ = 0;
  std::string transport_ = "one-sided (MPI_Win_allocate)";
  bool served_ = false;
  std::vector<T> plain_;                // served: this rank's elements
  Messages messages_;                   // served: the requests in flight, and the answering
  static constexpr std::size_t kFillBytes = 64 * 1024;  // fill()'s buffer at most
  std::vector<T> fill_;                 // fill()'s and one-sided fetch_and_fill's value, repeated
  std::vector<std::vector<T>> old_fills_;  // earlier ones, until their transfers complete
  std::deque<T> operands_;              // one-sided: non-blocking fetch_and_op's operands
  int epochs_ = 0;                      // epochs open (locks not yet released)
};

}  // namespace cohort::mpi
