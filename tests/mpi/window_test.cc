#include "cohort/mpi/window.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cohort/core/base/bfloat16.h"
#include "support/mpi_test.h"

using cohort::InvalidArgument;
using cohort::mpi::Comm;
using cohort::test::on_every_size;
using cohort::mpi::LockType;
using cohort::mpi::Op;
using cohort::mpi::Window;

namespace {

// Reads all of `target`'s elements through the window.
template <typename T>
std::vector<T> read(Window<T>& win, int target) {
  std::vector<T> out(win.count(target));
  auto lock = win.lock(target);
  win.get(std::span<T>(out), target, 0);
  return out;
}

}  // namespace

TEST_CASE("a window holds zeroed local memory of the size asked, per rank") {
  on_every_size([](const Comm& comm) {
    const auto mine = static_cast<std::size_t>(3 + comm.rank());
    Window<double> win(comm, mine);
    CHECK_FALSE(win.is_null());
    CHECK(win.local().size() == mine);
    CHECK(reinterpret_cast<std::uintptr_t>(win.local().data()) % Window<double>::kAlignment == 0);
    CHECK(std::all_of(win.local().begin(), win.local().end(), [](double x) { return x == 0.0; }));
    CHECK(win.comm().size() == comm.size());
    CHECK(win.comm().get() != comm.get());  // its own duplicate
    for (int r = 0; r < comm.size(); ++r) CHECK(win.count(r) == static_cast<std::size_t>(3 + r));
    int model_flag = 0;
    int* model = nullptr;
    MPI_Win_get_attr(win.get(), MPI_WIN_MODEL, &model, &model_flag);
    CHECK(model_flag == 1);

    Window<double> moved = std::move(win);
    CHECK(win.is_null());
    CHECK(moved.local().size() == mine);
    Window<std::int32_t> empty(comm, 0);  // zero elements is allowed
    CHECK(empty.local().empty());

    // Memory MPI hands out again after a free is zeroed too.
    for (int round = 0; round < 3; ++round) {
      Window<double> again(comm, mine);
      CHECK(std::all_of(again.local().begin(), again.local().end(),
                        [](double x) { return x == 0.0; }));
      std::fill(again.local().begin(), again.local().end(), 3.5);
    }
  });
}

TEST_CASE("put and get around a ring") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank(), right = (me + 1) % n;
    constexpr std::size_t kCount = 100;
    Window<float> win(comm, kCount);
    std::vector<float> data(kCount);
    std::iota(data.begin(), data.end(), static_cast<float>(1000 * me));
    {
      auto lock = win.lock(right, LockType::kExclusive);
      win.put(std::span<const float>(data).subspan(10, 20), right, 5);
    }
    comm.barrier();
    const std::vector<float> got = read(win, me);
    const int left = (me + n - 1) % n;
    for (std::size_t i = 0; i < kCount; ++i) {
      const float expected =
          i >= 5 && i < 25 ? static_cast<float>(1000 * left + 10 + (i - 5)) : 0.f;
      CHECK(got[i] == expected);
    }
    comm.barrier();
  });
}

TEST_CASE("concurrent accumulates from every rank into one target sum exactly") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    constexpr std::size_t kCount = 4096;
    constexpr int kRounds = 25;
    Window<float> win(comm, me == 0 ? kCount : 0);
    const std::vector<float> delta(kCount, static_cast<float>(me + 1));
    {
      auto lock = win.lock(0, LockType::kShared);  // shared: the accumulates really overlap
      for (int round = 0; round < kRounds; ++round)
        win.accumulate(std::span<const float>(delta), 0, 0);
    }
    comm.barrier();
    if (me == 0) {
      const std::vector<float> sum = read(win, 0);
      const float expected = static_cast<float>(kRounds * n * (n + 1) / 2);
      CHECK(std::count(sum.begin(), sum.end(), expected) == static_cast<long>(kCount));
    }
    comm.barrier();
  });
}

TEST_CASE("accumulate with max, and a counter that fetch_and_op hands out without repeats") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank(), target = n - 1;
    Window<std::int64_t> win(comm, 2);
    constexpr int kTakes = 50;
    std::vector<std::int64_t> taken;
    {
      auto lock = win.lock(target);
      for (int i = 0; i < kTakes; ++i) taken.push_back(win.fetch_and_op(1, target, 0));
      const std::int64_t mine = 100 + me;
      win.accumulate(std::span<const std::int64_t>(&mine, 1), target, 1, Op::kMax);
    }
    const auto all = comm.allgatherv(std::span<const std::int64_t>(taken));
    std::vector<std::int64_t> flat;
    for (const auto& part : all) flat.insert(flat.end(), part.begin(), part.end());
    std::sort(flat.begin(), flat.end());
    std::vector<std::int64_t> expected(static_cast<std::size_t>(kTakes * n));
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(flat == expected);  // every ticket once: the increments are atomic

    auto lock = win.lock(target);
    CHECK(win.fetch_and_op(0, target, 0, Op::kNoOp) == kTakes * n);
    CHECK(win.fetch_and_op(0, target, 1, Op::kNoOp) == 100 + n - 1);
    lock.unlock();
    CHECK_FALSE(lock.locked());
    comm.barrier();
    if (me == 0) {
      auto swap = win.lock(target, LockType::kExclusive);
      CHECK(win.fetch_and_op(-7, target, 1, Op::kReplace) == 100 + n - 1);
      CHECK(win.fetch_and_op(0, target, 1, Op::kNoOp) == -7);
    }
    comm.barrier();
  });
}

TEST_CASE("compare_and_swap elects exactly one rank; get_atomic reads counters whole") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    Window<std::int32_t> flag(comm, 1);
    Window<std::int64_t> win(comm, 3);
    std::int32_t previous = 0;
    {
      auto lock = flag.lock(0);
      previous = flag.compare_and_swap(me + 1, 0, 0, 0);  // only the first swap finds 0
    }
    {
      auto lock = win.lock(0);
      win.fetch_and_op(me + 1, 0, 1);
      win.fetch_and_op(1, 0, 2);
    }
    CHECK(comm.allreduce(previous == 0 ? 1 : 0) == 1);
    comm.barrier();
    std::vector<std::int64_t> slots(3);
    {
      auto lock = win.lock(0);
      win.get_atomic(std::span<std::int64_t>(slots), 0, 0);
    }
    CHECK(slots[1] == n * (n + 1) / 2);
    CHECK(slots[2] == n);
    comm.barrier();
    {
      auto lock = flag.lock(0, LockType::kExclusive);
      const std::int32_t winner = flag.fetch_and_op(0, 0, 0, Op::kNoOp);
      CHECK(winner >= 1);
      CHECK(winner <= n);
      CHECK(flag.compare_and_swap(-1, winner + 100, 0, 0) == winner);  // no match: unchanged
      CHECK(flag.fetch_and_op(0, 0, 0, Op::kNoOp) == winner);
    }
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
    if (std::getenv("OMPI_MCA_btl_vader_flags") == nullptr) {
      auto lock = win.lock(0);
      CHECK_THROWS_WITH_AS(win.compare_and_swap(1, 0, 0, 0), doctest::Contains("ompi#7967"),
                           cohort::Error);
    }
#endif
    comm.barrier();
  });
}

TEST_CASE("long transfers are split into chunks and still land whole") {
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  cohort::mpi::detail::for_each_chunk(
      10, 4, [&](std::size_t first, std::size_t n) { pieces.emplace_back(first, n); });
  CHECK(pieces == std::vector<std::pair<std::size_t, std::size_t>>{{0, 4}, {4, 4}, {8, 2}});
  pieces.clear();
  cohort::mpi::detail::for_each_chunk(
      0, 4, [&](std::size_t f, std::size_t n) { pieces.emplace_back(f, n); });
  CHECK(pieces.empty());

  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    constexpr std::size_t kCount = 1000;
    Window<double> win(comm, kCount);
    win.set_max_chunk(7);
    CHECK_THROWS_AS(win.set_max_chunk(0), InvalidArgument);
    const std::vector<double> ones(kCount, 1.0);
    {
      auto lock = win.lock(0);
      win.accumulate(std::span<const double>(ones), 0, 0);
    }
    comm.barrier();
    if (me == 0) {
      std::vector<double> got(kCount);
      auto lock = win.lock(0);
      win.get(std::span<double>(got), 0, 0);
      win.flush(0);
      CHECK(std::count(got.begin(), got.end(), static_cast<double>(n)) ==
            static_cast<long>(kCount));
      std::vector<double> ramp(kCount);
      std::iota(ramp.begin(), ramp.end(), 0.0);
      win.put(std::span<const double>(ramp), 0, 0);
      win.flush(0);
      std::vector<double> back(kCount), atomic(kCount);
      win.get(std::span<double>(back), 0, 0);
      win.get_atomic(std::span<double>(atomic), 0, 0);
      win.flush(0);
      CHECK(back == ramp);
      CHECK(atomic == ramp);
      // A fill of 500 elements from one buffer of 7 (the chunk), landing between the ramp's.
      win.fill(500, 2.5, 0, 100);
      win.flush(0);
      win.get(std::span<double>(back), 0, 0);
      lock.unlock();
      CHECK(back[99] == ramp[99]);
      CHECK(std::count(back.begin() + 100, back.begin() + 600, 2.5) == 500);
      CHECK(back[600] == ramp[600]);
    }
    comm.barrier();
  });
}

TEST_CASE("an exception inside a lock still unlocks the window") {
  on_every_size([](const Comm& comm) {
    const int me = comm.rank();
    Window<std::int32_t> win(comm, 1);
    if (me == 0) {
      try {
        auto lock = win.lock(0, LockType::kExclusive);
        const std::int32_t one = 1;
        win.put(std::span<const std::int32_t>(&one, 1), 0, 0);
        throw std::runtime_error("step failed");
      } catch (const std::runtime_error&) {
      }
    }
    comm.barrier();
    // Had the exclusive lock survived, these locks would never be granted.
    {
      auto lock = win.lock(0, LockType::kExclusive);
      const std::int32_t one = 1;
      win.accumulate(std::span<const std::int32_t>(&one, 1), 0, 0);
    }
    comm.barrier();
    if (me == 0) CHECK(read(win, 0)[0] == 1 + comm.size());
    comm.barrier();
  });
}

TEST_CASE("lock_all with flush_all reaches every rank") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    Window<std::int64_t> win(comm, static_cast<std::size_t>(n));
    {
      auto lock = win.lock_all();
      const std::int64_t value = me + 1;
      for (int target = 0; target < n; ++target)
        win.put(std::span<const std::int64_t>(&value, 1), target, static_cast<std::size_t>(me));
      win.flush_all();
    }
    comm.barrier();
    std::vector<std::int64_t> expected(static_cast<std::size_t>(n));
    std::iota(expected.begin(), expected.end(), 1);
    CHECK(read(win, me) == expected);
    comm.barrier();
  });
}

TEST_CASE("out-of-range transfers and targets are refused before reaching MPI") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    Window<float> win(comm, 10);
    std::vector<float> buffer(4);
    auto lock = win.lock(0);
    CHECK_THROWS_WITH_AS(win.get(std::span<float>(buffer), 0, 7),
                         doctest::Contains("elements [7, 11) are outside rank 0's 10 elements"),
                         InvalidArgument);
    CHECK_THROWS_WITH_AS(win.put(std::span<const float>(buffer), n, 0),
                         doctest::Contains(("target rank " + std::to_string(n)).c_str()),
                         InvalidArgument);
    CHECK_THROWS_AS(win.fetch_and_op(1.f, 0, 10), InvalidArgument);
    CHECK_THROWS_AS(win.lock(-1), InvalidArgument);
    lock.unlock();
    comm.barrier();
  });
}

TEST_CASE("a served window (no one-sided transport) sums, moves and swaps as a one-sided one") {
  on_every_size([](const Comm& comm) {
    if (comm.size() < 2) return;
    // What a machine without a one-sided transport gets; set alike on every rank.
    setenv("COHORT_ONE_SIDED", "0", 1);
    Window<std::int64_t> counters(comm, comm.rank() == 0 ? 4 : 0);
    Window<float> values(comm, comm.rank() == 0 ? 14 : 0);
    unsetenv("COHORT_ONE_SIDED");
    CHECK(values.served());
    CHECK(values.transport() == "served by messages (COHORT_ONE_SIDED=0)");
    CHECK(reinterpret_cast<std::uintptr_t>(values.local().data()) % Window<float>::kAlignment == 0);
    CHECK_FALSE(values.is_null());
    const int origins = comm.size() - 1;
    const int me = comm.rank();
    // Counter slots: 0 fetch-and-add total, 1 the compare-and-swap's winner, 2 winners, 3 done.
    if (me == 0) {
      while (counters.local()[3] < origins) {
        if (values.serve() + counters.serve() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      // Elements 0..4: origin r put r at r - 1. Elements 5..9: every origin added its rank.
      // Elements 10..13: origin 1 filled them with 7.5.
      const float total = static_cast<float>(origins * (origins + 1) / 2);
      for (int i = 0; i < 14; ++i) {
        const float expected = i >= 10 ? 7.5f
                               : i >= 5 ? total
                               : i < origins ? static_cast<float>(i + 1)
                                             : 0.0f;
        CHECK(values.local()[static_cast<std::size_t>(i)] == expected);
      }
      CHECK(counters.local()[0] == origins);
      CHECK(counters.local()[2] == 1);
      CHECK(counters.local()[1] >= 1);
      CHECK(counters.local()[1] <= origins);
    } else {
      values.set_max_chunk(2);  // 5 elements: three requests
      const std::vector<float> mine(5, static_cast<float>(me));
      const auto at = static_cast<std::size_t>(me - 1);
      {
        auto lock = values.lock(0);
        values.accumulate(std::span<const float>(mine), 0, 5);
        values.put(std::span<const float>(mine.data(), 1), 0, at);
        if (me == 1) values.fill(4, 7.5f, 0, 10);  // two requests
      }
      std::vector<float> back(1);
      {
        auto lock = values.lock(0);
        values.get(std::span<float>(back), 0, at);
      }
      CHECK(back[0] == static_cast<float>(me));
      CHECK(counters.fetch_and_op(1, 0, 0, Op::kSum) >= 0);
      if (counters.compare_and_swap(me, 0, 0, 1) == 0) counters.fetch_and_op(1, 0, 2, Op::kSum);
      std::vector<std::int64_t> seen(1);
      {
        auto lock = counters.lock(0);
        counters.get_atomic(std::span<std::int64_t>(seen), 0, 1);
      }
      CHECK(seen[0] >= 1);
      counters.fetch_and_op(1, 0, 3, Op::kSum);
    }
    comm.barrier();
  });
}

namespace {

// Every origin adds 1 to each of rank 0's elements, round after round, and every other round
// takes the sums so far and resets them (fetch_and_fill). Nothing may be lost or counted twice:
// what was taken plus what is left equals what was added, element by element. Served: rank 0
// only serves, the others are the origins.
void take_and_reset_under_accumulates(const Comm& comm, bool served) {
  if (served) setenv("COHORT_ONE_SIDED", "0", 1);
  constexpr std::size_t kCount = 3000;
  constexpr int kRounds = 40;
  Window<std::int64_t> sums(comm, comm.rank() == 0 ? kCount : 0);
  Window<std::int64_t> done(comm, comm.rank() == 0 ? 1 : 0);
  unsetenv("COHORT_ONE_SIDED");
  REQUIRE(sums.served() == served);
  const int me = comm.rank();
  const int origins = served ? comm.size() - 1 : comm.size();
  std::vector<std::int64_t> taken(kCount, 0);
  if (served && me == 0) {
    while (done.local()[0] < origins)
      if (sums.serve() + done.serve() == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
  } else {
    sums.set_max_chunk(1000);  // several requests or MPI calls per transfer
    const std::vector<std::int64_t> ones(kCount, 1);
    std::vector<std::int64_t> got(kCount);
    for (int round = 0; round < kRounds; ++round) {
      auto lock = sums.lock(0);
      sums.accumulate(std::span<const std::int64_t>(ones), 0, 0);
      if (round % 2 == 1) {
        sums.order(0);  // the take comes after this round's add
        sums.fetch_and_fill(std::span<std::int64_t>(got), 0, 0, 0);
        lock.unlock();
        for (std::size_t i = 0; i < kCount; ++i) taken[i] += got[i];
      }
    }
    auto lock = done.lock(0);
    done.fetch_and_op(1, 0, 0, Op::kSum);
  }
  comm.barrier();  // every transfer is complete
  std::vector<std::int64_t> all(kCount, 0);
  MPI_Allreduce(taken.data(), all.data(), static_cast<int>(kCount), MPI_INT64_T, MPI_SUM,
                comm.get());
  if (me == 0) {
    // One-sided: rank 0 reads its own memory through the window; served: it is plain memory.
    const std::vector<std::int64_t> left =
        served ? std::vector<std::int64_t>(sums.local().begin(), sums.local().end())
               : read(sums, 0);
    for (std::size_t i = 0; i < kCount; ++i) all[i] += left[i];
    CHECK(std::count(all.begin(), all.end(), std::int64_t{kRounds} * origins) ==
          static_cast<long>(kCount));
  }
  comm.barrier();
}

}  // namespace

TEST_CASE("fetch_and_fill takes a sum and resets it without losing a concurrent accumulate") {
  on_every_size([](const Comm& comm) { take_and_reset_under_accumulates(comm, false); });
  on_every_size([](const Comm& comm) {
    if (comm.size() >= 2) take_and_reset_under_accumulates(comm, true);
  });
}

// bfloat16 on the wire, where the target converts: an add of bfloat16 values, and a take that
// hands out the bfloat16 nearest each element and leaves what that lost, so that what was taken
// plus what is left is exactly what was there. One-sided windows refuse both.
TEST_CASE("served float windows add and take bfloat16, losing nothing; one-sided ones refuse") {
  on_every_size([](const Comm& comm) {
    if (comm.size() < 2) return;
    for (const bool served : {false, true}) {
      if (served) setenv("COHORT_ONE_SIDED", "0", 1);
      Window<float> win(comm, comm.rank() == 0 ? 64 : 0);
      unsetenv("COHORT_ONE_SIDED");
      const std::vector<std::uint16_t> twos(64, cohort::bf16::from_float(2.0f));
      std::vector<std::uint16_t> taken(64);
      if (comm.rank() == 1) {
        auto lock = win.lock(0);
        if (!served) {
          CHECK_THROWS_AS(win.accumulate_bf16(std::span<const std::uint16_t>(twos), 0, 0), cohort::Error);
          CHECK_THROWS_AS(win.take_bf16(std::span<std::uint16_t>(taken), 0, 0), cohort::Error);
        } else {
          // 1 + 2^-10 + i * 2^-14; plus 2, between the bfloat16 neighbours 3 and 3 + 2^-6.
          std::vector<float> start(64);
          for (std::size_t i = 0; i < 64; ++i)
            start[i] = 1.0f + 0x1p-10f + static_cast<float>(i) * 0x1p-14f;
          win.put(std::span<const float>(start), 0, 0);
          win.accumulate_bf16(std::span<const std::uint16_t>(twos), 0, 0);
          win.take_bf16(std::span<std::uint16_t>(taken), 0, 0);
          std::vector<float> left(64);
          win.get(std::span<float>(left), 0, 0);
          lock.unlock();
          for (std::size_t i = 0; i < 64; ++i) {
            CAPTURE(i);
            CHECK(cohort::bf16::to_float(taken[i]) + left[i] == start[i] + 2.0f);
            CHECK(left[i] != 0.0f);  // the rounding did lose something, kept at the target
          }
        }
      }
      MPI_Request barrier;
      MPI_Ibarrier(comm.get(), &barrier);
      for (int finished = 0; !finished;) {
        if (served && comm.rank() == 0) win.serve();
        MPI_Test(&barrier, &finished, MPI_STATUS_IGNORE);
      }
    }
  });
}

TEST_CASE("order(): a value written before its flag is there for whoever sees the flag") {
  on_every_size([](const Comm& comm) {
    if (comm.size() < 2) return;
    for (const bool served : {false, true}) {
      if (served) setenv("COHORT_ONE_SIDED", "0", 1);
      Window<std::int64_t> win(comm, comm.rank() == 0 ? 101 : 0);  // [flag, 100 values]
      unsetenv("COHORT_ONE_SIDED");
      const int me = comm.rank();
      if (me == 1) {
        const std::vector<std::int64_t> values(100, 7);
        const std::int64_t flag = 1;
        auto lock = win.lock(0);
        win.put(std::span<const std::int64_t>(values), 0, 1);
        win.order(0);
        win.accumulate(std::span<const std::int64_t>(&flag, 1), 0, 0, Op::kReplace);
      } else if (me == 2 || (me == 0 && !served)) {
        // A reader polls the flag, then reads the values.
        std::vector<std::int64_t> seen(100);
        for (;;) {
          auto lock = win.lock(0);
          if (win.fetch_and_op(0, 0, 0, Op::kNoOp) != 0) break;
        }
        auto lock = win.lock(0);
        win.get(std::span<std::int64_t>(seen), 0, 1);
        lock.unlock();
        CHECK(std::count(seen.begin(), seen.end(), 7) == 100);
      }
      // A barrier that rank 0 serves through while the others' requests may still come.
      MPI_Request barrier;
      MPI_Ibarrier(comm.get(), &barrier);
      for (int finished = 0; !finished;) {
        if (served && me == 0) win.serve();
        MPI_Test(&barrier, &finished, MPI_STATUS_IGNORE);
      }
    }
  });
}

namespace {

// Collective. Rank 1 puts a value into rank 0's first element while rank 0 makes no MPI call for
// up to `patience`, watching its memory; true on every rank if the value landed meanwhile. Where
// the transport needs the target's MPI calls, the put completes only in the broadcast after.
bool lands_while_target_is_out_of_mpi(Window<std::int64_t>& win, const Comm& comm,
                                      std::chrono::milliseconds patience) {
  comm.barrier();
  int landed = 0;
  if (comm.rank() == 1) {
    const std::int64_t value = 42;
    auto lock = win.lock(0);
    win.put(std::span<const std::int64_t>(&value, 1), 0, 0);
  } else if (comm.rank() == 0) {
    const volatile std::int64_t* cell = win.local().data();
    const auto start = std::chrono::steady_clock::now();
    while (!(landed = *cell == 42) && std::chrono::steady_clock::now() - start < patience)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  MPI_Bcast(&landed, 1, MPI_INT, 0, comm.get());
  return landed != 0;
}

}  // namespace

// Run by default on shared memory (one-sided: osc rdma), and over TCP with Open MPI's osc pt2pt
// (tests/mpi/CMakeLists.txt), where a transfer moves only when its target calls MPI.
TEST_CASE("a window stays one-sided only where a transfer lands while its target is out of MPI") {
  on_every_size([](const Comm& comm) {
    if (comm.size() < 2) return;
    Window<std::int64_t> chosen(comm, 1);
    setenv("COHORT_ONE_SIDED", "1", 1);  // the window MPI makes, kept without asking
    Window<std::int64_t> made(comm, 1);
    unsetenv("COHORT_ONE_SIDED");
    if (comm.rank() == 0)
      std::printf("window over %d ranks: %s\n", comm.size(), chosen.transport().c_str());
    if (made.served()) {  // MPI made no window at all
      CHECK(chosen.served());
      return;
    }
    // Patience to spare where the window was judged one-sided (a put lands in microseconds).
    const auto patience = std::chrono::milliseconds(chosen.served() ? 2000 : 10000);
    const bool lands = lands_while_target_is_out_of_mpi(made, comm, patience);
    CHECK(chosen.served() == !lands);
    if (chosen.served())
      CHECK(chosen.transport() ==
            "served by messages (MPI's window moves a transfer only when its target calls MPI)");
    comm.barrier();
  });
}
