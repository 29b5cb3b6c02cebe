#include "cohort/mpi/comm.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "cohort/core/base/bfloat16.h"
#include "cohort/mpi/environment.h"
#include "cohort/mpi/request.h"
#include "support/mpi_test.h"

using cohort::InvalidArgument;
using cohort::mpi::Comm;
using cohort::mpi::Environment;
using cohort::test::on_every_size;
using cohort::mpi::Op;
using cohort::mpi::Request;

namespace {

constexpr int kTag = 7;

}  // namespace

TEST_CASE("world and self communicators") {
  const Comm world = Comm::world();
  CHECK(world.size() >= 1);
  CHECK(world.rank() >= 0);
  CHECK(world.rank() < world.size());
  CHECK(Comm::self().size() == 1);
  CHECK(Comm::self().rank() == 0);
}

TEST_CASE("the MPI library loaded is of the family this library was built with") {
  const std::string built = Environment::built_with(), loaded = Environment::loaded();
  INFO("built with " << built << ", loaded " << loaded);
  CHECK(!loaded.empty());
  CHECK(loaded.find('\n') == std::string::npos);
  CHECK(Environment::library_mismatch(built, loaded).empty());
#if defined(OPEN_MPI)
  CHECK(built.rfind("Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + ".", 0) == 0);
  CHECK(loaded.rfind("Open MPI v" + std::to_string(OMPI_MAJOR_VERSION) + ".", 0) == 0);
#endif
}

TEST_CASE("a program refuses an MPI library of another family, naming both") {
  const std::string open_mpi = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4";
  const std::string mpich = "MPICH Version:\t4.0.2";
  const std::string intel = "Intel(R) MPI Library 2021.6 for Linux* OS";
  const std::string refused = Environment::library_mismatch("Open MPI 4.1.4", mpich);
  CHECK(refused.find("built with Open MPI 4.1.4") != std::string::npos);
  CHECK(refused.find("'MPICH Version:\t4.0.2'") != std::string::npos);
  CHECK(!Environment::library_mismatch("Open MPI 4.1.4", intel).empty());
  CHECK(!Environment::library_mismatch("MPICH 4.0.2", open_mpi).empty());
  // Another release of the same family, and the MPICH ABI's other members, pass.
  CHECK(Environment::library_mismatch("Open MPI 4.1.4", "Open MPI v4.1.6").empty());
  CHECK(Environment::library_mismatch("MPICH 4.0.2", intel).empty());
  CHECK(Environment::library_mismatch("MPICH 4.0.2", mpich).empty());
  // What cannot be told apart passes: an unknown build, or a library that said nothing.
  CHECK(Environment::library_mismatch("MPI 3.1", mpich).empty());
  CHECK(Environment::library_mismatch("Open MPI 4.1.4", "").empty());
}

TEST_CASE("dup, split and split_shared keep ranks consistent") {
  on_every_size([](const Comm& comm) {
    const Comm copy = comm.dup();
    CHECK(copy.size() == comm.size());
    CHECK(copy.rank() == comm.rank());
    int result = MPI_IDENT;
    MPI_Comm_compare(copy.get(), comm.get(), &result);
    CHECK(result == MPI_CONGRUENT);  // same ranks, own context

    // Even and odd ranks, ordered backwards.
    const Comm half = comm.split(comm.rank() % 2, -comm.rank());
    const int members = (comm.size() + (comm.rank() % 2 == 0 ? 1 : 0)) / 2;
    CHECK(half.size() == members);
    CHECK(half.rank() == members - 1 - comm.rank() / 2);

    const Comm none = comm.split(comm.rank() == 0 ? MPI_UNDEFINED : 1, 0);
    CHECK(none.is_null() == (comm.rank() == 0));

    const Comm node = comm.split_shared();  // one machine: everyone
    CHECK(node.size() == comm.size());
  });
}

TEST_CASE("a moved communicator leaves a null one behind") {
  Comm a = Comm::world().dup();
  const int size = a.size();
  Comm b = std::move(a);
  CHECK(a.is_null());
  CHECK(b.size() == size);
  a = std::move(b);
  CHECK(b.is_null());
  CHECK(a.size() == size);
  CHECK_THROWS_AS(Comm::adopt(MPI_COMM_WORLD), InvalidArgument);
}

TEST_CASE("allreduce_bf16: bfloat16 sums, the same on every rank") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    // Small integers and halves: every partial sum is a bfloat16, so the sum is exact.
    std::vector<std::uint16_t> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = cohort::bf16::from_float(static_cast<float>(i % 7) * 0.5f - static_cast<float>(me));
    comm.allreduce_bf16(std::span<std::uint16_t>(v));
    for (std::size_t i = 0; i < v.size(); ++i)
      CHECK(cohort::bf16::to_float(v[i]) ==
            static_cast<float>(n) * static_cast<float>(i % 7) * 0.5f -
                static_cast<float>(n * (n - 1) / 2));
    // Values that round: whatever order the ranks added them in, all hold the same result.
    std::vector<std::uint16_t> r(257);
    for (std::size_t i = 0; i < r.size(); ++i)
      r[i] = cohort::bf16::from_float(1.0f / static_cast<float>(i + 3 + static_cast<std::size_t>(me)));
    comm.allreduce_bf16(std::span<std::uint16_t>(r));
    const std::vector<std::uint16_t> root = [&] {
      std::vector<std::uint16_t> copy = r;
      comm.bcast(std::span<std::uint16_t>(copy), 0);
      return copy;
    }();
    CHECK(r == root);
  });
}

TEST_CASE("iallreduce and iallreduce_bf16: several in flight, each summed when completed") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    std::vector<float> a(1000), b(3);
    std::vector<std::uint16_t> c(300);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) + static_cast<float>(me);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(me * me) - static_cast<float>(i);
    for (std::size_t i = 0; i < c.size(); ++i)
      c[i] = cohort::bf16::from_float(static_cast<float>(i % 5) + 0.5f * static_cast<float>(me));
    Request first = comm.iallreduce(std::span<float>(a));
    Request second = comm.iallreduce_bf16(std::span<std::uint16_t>(c));
    Request third = comm.iallreduce(std::span<float>(b));
    // Completed out of order, the last by polling.
    second.wait();
    first.wait();
    while (!third.test()) {
    }
    CHECK(!first.active());
    const float ranks = static_cast<float>(n * (n - 1) / 2), squares = static_cast<float>((n - 1) * n * (2 * n - 1) / 6);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == static_cast<float>(n) * static_cast<float>(i) + ranks);
    for (std::size_t i = 0; i < b.size(); ++i) CHECK(b[i] == squares - static_cast<float>(n) * static_cast<float>(i));
    // Small integers and halves: every partial sum is a bfloat16, so the sum is exact.
    for (std::size_t i = 0; i < c.size(); ++i)
      CHECK(cohort::bf16::to_float(c[i]) == static_cast<float>(n) * static_cast<float>(i % 5) + 0.5f * ranks);
  });
}

TEST_CASE("collectives: allreduce, bcast, allgather, allgatherv, strings") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    CHECK(comm.allreduce(me + 1) == n * (n + 1) / 2);
    CHECK(comm.allreduce(me, Op::kMax) == n - 1);
    CHECK(comm.allreduce(static_cast<double>(me), Op::kMin) == 0.0);
    std::vector<float> v(5, static_cast<float>(me));
    comm.allreduce(std::span<float>(v));
    CHECK(v[4] == static_cast<float>(n * (n - 1) / 2));

    std::vector<std::int64_t> b{me == n - 1 ? 42 : 0, me == n - 1 ? -1 : 0};
    comm.bcast(std::span<std::int64_t>(b), n - 1);
    CHECK(b == std::vector<std::int64_t>{42, -1});

    const std::vector<int> ranks = comm.allgather(me * 10);
    REQUIRE(ranks.size() == static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) CHECK(ranks[static_cast<std::size_t>(r)] == r * 10);

    // Rank r contributes r elements of value r.
    const std::vector<int> mine(static_cast<std::size_t>(me), me);
    const auto all = comm.allgatherv(std::span<const int>(mine));
    REQUIRE(all.size() == static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      CHECK(all[static_cast<std::size_t>(r)] == std::vector<int>(static_cast<std::size_t>(r), r));

    const auto names = comm.allgather_strings(std::string(static_cast<std::size_t>(me), 'x'));
    for (int r = 0; r < n; ++r)
      CHECK(names[static_cast<std::size_t>(r)] == std::string(static_cast<std::size_t>(r), 'x'));
    CHECK(comm.bcast_string(me == 0 ? "from root" : "ignored", 0) == "from root");
  });
}

TEST_CASE("send and recv around a ring, blocking and not") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    std::vector<double> out{static_cast<double>(me), 0.5};
    std::vector<double> in(2, -1.0);
    Request receive = comm.irecv(std::span<double>(in), left, kTag);
    CHECK(receive.active());
    comm.send(std::span<const double>(out), right, kTag);
    const MPI_Status status = receive.wait();
    CHECK_FALSE(receive.active());
    CHECK(status.MPI_SOURCE == left);
    CHECK(in == std::vector<double>{static_cast<double>(left), 0.5});

    // Non-blocking send, blocking receive, probe first.
    std::int32_t token = me, got = -1;
    Request send = comm.isend(std::span<const std::int32_t>(&token, 1), right, kTag + 1);
    std::optional<MPI_Status> probed;
    while (!(probed = comm.iprobe(left, kTag + 1))) {
    }
    CHECK(probed->MPI_SOURCE == left);
    comm.recv(std::span<std::int32_t>(&got, 1), MPI_ANY_SOURCE, kTag + 1);
    CHECK(got == left);
    send.wait();
    CHECK_FALSE(comm.iprobe(MPI_ANY_SOURCE, kTag + 1).has_value());
    comm.barrier();
  });
}

TEST_CASE("ibarrier completes only once every rank has entered it") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    if (me < n - 1) {
      // The last rank has not entered yet: it waits for word from every other rank first.
      Request barrier = comm.ibarrier();
      CHECK_FALSE(barrier.test().has_value());
      const int tested = 1;
      comm.send(std::span<const int>(&tested, 1), n - 1, kTag + 3);
      barrier.wait();
      CHECK_FALSE(barrier.active());
    } else {
      for (int r = 0; r < n - 1; ++r) {
        int tested = 0;
        comm.recv(std::span<int>(&tested, 1), r, kTag + 3);
      }
      comm.ibarrier().wait();
    }
  });
}

TEST_CASE("requests: null, test, cancel, move") {
  Request null;
  CHECK_FALSE(null.active());
  CHECK(null.test().has_value());
  CHECK_FALSE(null.cancel().has_value());
  null.wait();

  // A receive nobody will match is cancelled, and then the destructor has nothing to wait for.
  const Comm self = Comm::self();
  int value = 0;
  Request never = self.irecv(std::span<int>(&value, 1), 0, kTag);
  CHECK_FALSE(never.test().has_value());
  Request moved = std::move(never);
  CHECK_FALSE(never.active());
  CHECK(moved.active());
  CHECK_FALSE(moved.cancel().has_value());
  CHECK_FALSE(moved.active());

  // A receive that has completed cannot be cancelled: cancel() reports its status.
  int sent = 5;
  Request receive = self.irecv(std::span<int>(&value, 1), 0, kTag);
  self.send(std::span<const int>(&sent, 1), 0, kTag);
  const auto status = receive.cancel();
  REQUIRE(status.has_value());
  CHECK(status->MPI_SOURCE == 0);
  CHECK(value == 5);

  // The destructor of an active request waits for it.
  {
    Request pending = self.isend(std::span<const int>(&sent, 1), 0, kTag + 2);
    int got = 0;
    self.recv(std::span<int>(&got, 1), 0, kTag + 2);
    CHECK(got == 5);
  }
  CHECK_FALSE(self.iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG).has_value());
}

TEST_CASE("counts beyond INT_MAX are refused, not truncated") {
  CHECK(Comm::count_of(12, "x") == 12);
  CHECK_THROWS_WITH_AS(Comm::count_of(std::size_t{1} << 31, "send"),
                       doctest::Contains("send: 2147483648 elements exceed"), InvalidArgument);
}
