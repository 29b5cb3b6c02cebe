#include "cohort/core/dist/server.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "cohort/core/base/clock.h"
#include "support/mpi_test.h"

using cohort::ClusterSpec;
using cohort::Error;
using cohort::InvalidArgument;
using cohort::Server;
using cohort::TaskId;
using cohort::mpi::Comm;
using cohort::test::on_every_size;
using namespace std::chrono_literals;

TEST_CASE("a server knows its job, task, target and whether it is the chief") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    const ClusterSpec cluster = ClusterSpec::from_counts(comm, n > 1 ? 1 : 0);
    Server server(cluster);
    CHECK(&server.cluster() == &cluster);
    const TaskId expected =
        n > 1 && me == 0 ? TaskId{"ps", 0} : TaskId{"worker", n > 1 ? me - 1 : me};
    CHECK(server.job_name() == expected.job);
    CHECK(server.task_index() == expected.index);
    CHECK(server.task() == expected);
    CHECK(server.is_computing() == (expected.job == "worker"));
    CHECK(server.is_chief() == (expected == TaskId{"worker", 0}));
    CHECK(server.target() == "mpi://" + expected.job + "/" + std::to_string(expected.index) +
                                 "@rank" + std::to_string(me));
    CHECK(server.worker_device() ==
          "/job:" + expected.job + "/task:" + std::to_string(expected.index));

    Server checked(cluster, expected.job, expected.index);
    CHECK(checked.target() == server.target());
    // Every rank names a wrong task; every rank reports the first one.
    CHECK_THROWS_WITH_AS(
        Server(cluster, expected.job, expected.index + 1),
        doctest::Contains(
            ("rank 0 is " + cluster.task_of(0).to_string() + " in the cluster spec").c_str()),
        InvalidArgument);
    // Only the last rank names a wrong task: still every rank throws.
    const bool last = me == n - 1;
    CHECK_THROWS_WITH_AS(Server(cluster, expected.job, expected.index + (last ? 1 : 0)),
                         doctest::Contains(("rank " + std::to_string(n - 1) + " is " +
                                            cluster.task_of(n - 1).to_string())
                                               .c_str()),
                         InvalidArgument);
    CHECK_THROWS_AS(Server(cluster, "evaluator", 0), InvalidArgument);
  });
}

TEST_CASE("with a chief job, the chief task is the chief and worker 0 is not") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    if (n < 2) return;
    std::vector<int> workers;
    for (int r = 0; r < n - 1; ++r) workers.push_back(r);
    const ClusterSpec cluster =
        ClusterSpec::from_ranks(comm, {{"worker", workers}, {"chief", {n - 1}}});
    Server server(cluster);
    CHECK(server.is_chief() == (comm.rank() == n - 1));
    CHECK(server.is_computing());
  });
}

TEST_CASE("the replicas are the chief job's task, then the workers; a ps or evaluator is none") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    if (n < 4) return;
    // ps on rank 0, workers on 1 .. n-3, the chief on n-2, an evaluator on n-1.
    std::vector<int> workers;
    for (int r = 1; r < n - 2; ++r) workers.push_back(r);
    const ClusterSpec cluster = ClusterSpec::from_ranks(
        comm, {{"ps", {0}}, {"worker", workers}, {"chief", {n - 2}}, {"evaluator", {n - 1}}});
    Server server(cluster);
    CHECK(server.num_replicas() == n - 2);
    CHECK(server.replica_task(0) == TaskId{"chief", 0});
    CHECK(server.replica_rank(0) == n - 2);
    CHECK(server.replica_task(1) == TaskId{"worker", 0});
    CHECK_THROWS_AS(server.replica_task(n - 2), InvalidArgument);
    const int me = comm.rank();
    const int expected = me == 0 || me == n - 1 ? -1 : me == n - 2 ? 0 : me;
    CHECK(server.replica_index() == expected);
    CHECK(server.is_chief() == (me == n - 2));
    if (server.is_computing()) {
      REQUIRE_FALSE(server.replicas().is_null());
      CHECK(server.replicas().size() == n - 2);
      CHECK(server.replicas().rank() == expected);
      server.done();
    } else {
      CHECK(server.replicas().is_null());
      server.join(20s);
    }
  });
}

TEST_CASE("an evaluator sees training end without blocking; join() then returns at once") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    if (n < 2) return;
    std::vector<int> workers;
    for (int r = 0; r < n - 1; ++r) workers.push_back(r);
    const ClusterSpec cluster = ClusterSpec::from_ranks(comm, {{"worker", workers}, {"evaluator", {n - 1}}});
    Server server(cluster);
    if (server.is_computing()) {
      CHECK_THROWS_AS(server.training_done(), InvalidArgument);
      comm.barrier();  // the evaluator has looked once before anyone is done
      server.done();
    } else {
      CHECK_FALSE(server.training_done());
      comm.barrier();
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (!server.training_done() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
      CHECK(server.training_done());
      server.join(1ms);
      CHECK(server.tasks_done().size() == workers.size());
    }
  });
}

TEST_CASE("ps tasks join until every worker is done, then return") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    for (int ps = 0; ps < n; ++ps) {
      const ClusterSpec cluster = ClusterSpec::from_counts(comm, ps);
      Server server(cluster);
      if (server.job_name() == "ps") {
        CHECK_THROWS_AS(server.done(), InvalidArgument);
        server.join(20s);
        CHECK(server.tasks_done().size() == static_cast<std::size_t>(n - ps));
        server.join(1ms);  // everyone is done already: returns at once
      } else {
        CHECK_THROWS_WITH_AS(server.join(), doctest::Contains("is a computing task"),
                             InvalidArgument);
        // Workers finish at different times, and saying it twice is harmless.
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * server.task_index()));
        server.done();
        server.done();
        CHECK(server.tasks_done().empty());
      }
      comm.barrier();
    }
  });
}

TEST_CASE("a worker whose server goes away without done() still lets the ps finish") {
  on_every_size([](const Comm& comm) {
    if (comm.size() < 2) return;
    const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
    Server server(cluster);
    Server moved(std::move(server));  // the moved-from server says nothing
    if (moved.job_name() == "ps") moved.join(20s);
  });
}

TEST_CASE("a server given its cluster spec by value keeps it, through a move too") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    // The spec a temporary, as `Server server(cluster_from_flags())` gives it: the server's own.
    Server server(ClusterSpec::from_counts(comm, n > 1 ? 1 : 0));
    Server moved(std::move(server));
    CHECK(moved.cluster().size() == n);
    CHECK(moved.cluster().ranks_of("ps").size() == (n > 1 ? 1u : 0u));
    CHECK(moved.cluster().task_of(comm.rank()) == moved.task());
    if (moved.job_name() == "ps") {
      moved.join(20s);
      CHECK(moved.tasks_done().size() == static_cast<std::size_t>(n - 1));
    } else {
      moved.done();
    }
    ClusterSpec named = ClusterSpec::from_counts(comm, 0);
    const TaskId mine = named.my_task();
    Server checked(std::move(named), mine.job, mine.index);
    CHECK(checked.task() == mine);
    CHECK_THROWS_AS(Server(ClusterSpec::from_counts(comm, 0), "evaluator", 0), InvalidArgument);
  });
}

TEST_CASE("join with a timeout names the workers not done, and can be called again") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    if (n < 2) return;
    // ps:0 on rank 0, an evaluator on rank 1 when there is room, workers on the rest.
    const int first_worker = n >= 3 ? 2 : 1;
    std::vector<int> workers;
    for (int r = first_worker; r < n; ++r) workers.push_back(r);
    ClusterSpec::JobList jobs{{"ps", {0}}, {"worker", workers}};
    if (n >= 3) jobs.push_back({"evaluator", {1}});
    const ClusterSpec cluster = ClusterSpec::from_ranks(comm, jobs);
    Server server(cluster);
    // Worker 0 is done early, the others only after the ps timed out.
    if (server.task() == TaskId{"worker", 0}) server.done();
    comm.barrier();
    if (!server.is_computing()) {
      std::string waiting;
      for (int w = 1; w < static_cast<int>(workers.size()); ++w)
        waiting += std::string(w > 1 ? ", " : "") + "worker:" + std::to_string(w) + " (rank " +
                   std::to_string(workers[static_cast<std::size_t>(w)]) + ")";
      if (workers.size() > 1) {
        CHECK_THROWS_WITH_AS(
            server.join(100ms),
            doctest::Contains(
                ("timed out after 100 ms; still waiting for done() from " + waiting).c_str()),
            Error);
      } else {
        server.join(20s);
      }
    }
    comm.barrier();
    if (server.is_computing())
      server.done();
    else
      server.join(20s);
    if (!server.is_computing()) CHECK(server.tasks_done().size() == workers.size());
  });
}

TEST_CASE("a ps waiting in join() uses almost no CPU") {
  cohort::test::run_on_ranks(2, [](const Comm& comm) {
    const ClusterSpec cluster = ClusterSpec::from_counts(comm, 1);
    Server server(cluster);
    constexpr auto kWait = 1500ms;
    comm.barrier();
    if (server.job_name() == "ps") {
      const double cpu_before = cohort::process_cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      server.join(20s);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double cpu = cohort::process_cpu_seconds() - cpu_before;
      MESSAGE("ps in join(): " << cpu * 1e3 << " ms CPU over " << wall
                               << " s wall = " << 100.0 * cpu / wall << "% of a core");
      CHECK(wall >= 1.4);
      CHECK(cpu / wall < 0.10);
    } else {
      std::this_thread::sleep_for(kWait);
      server.done();
    }
  });
}
