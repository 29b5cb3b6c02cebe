#include "cohort/mpi/cluster_spec.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/mpi_test.h"

using cohort::InvalidArgument;
using cohort::mpi::ClusterSpec;
using cohort::mpi::Comm;
using cohort::test::on_every_size;
using cohort::mpi::TaskId;

namespace {

// The invariants every spec keeps, checked on every rank.
void check_consistent(const ClusterSpec& spec, const Comm& comm) {
  CHECK(spec.size() == comm.size());
  CHECK(spec.my_rank() == comm.rank());
  CHECK(spec.world().size() == comm.size());
  CHECK(spec.world().rank() == comm.rank());
  CHECK(spec.world().get() != comm.get());
  int total = 0;
  for (const std::string& job : spec.job_names()) {
    CHECK(spec.has_job(job));
    CHECK(spec.num_tasks(job) > 0);
    total += spec.num_tasks(job);
    for (int task = 0; task < spec.num_tasks(job); ++task) {
      const int rank = spec.rank_of(job, task);
      CHECK(spec.task_of(rank) == TaskId{job, task});
    }
  }
  CHECK(total == comm.size());
  CHECK((spec.has_job("worker") || spec.has_job("chief")));
  CHECK(spec.task_of(spec.my_rank()) == spec.my_task());
  CHECK(spec.job_comm().size() == spec.num_tasks(spec.my_task().job));
  CHECK(spec.job_comm().rank() == spec.my_task().index);
  // The same spec everywhere.
  const std::string text = spec.to_string() + "|" + spec.table();
  CHECK(spec.world().allreduce(comm.bcast_string(text, 0) == text ? 0 : 1) == 0);
}

// Every rank must throw InvalidArgument containing `expected`.
template <typename F>
void check_fails_everywhere(const Comm& comm, F&& build, const std::string& expected) {
  std::string message = "(no error)";
  try {
    build();
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
  CHECK(comm.allreduce(message.find(expected) != std::string::npos ? 0 : 1) == 0);
}

}  // namespace

TEST_CASE("task ids print as job:index") {
  CHECK(TaskId{"worker", 1}.to_string() == "worker:1");
  CHECK(cohort::mpi::known_job_names() ==
        std::vector<std::string>{"chief", "ps", "worker", "evaluator"});
}

TEST_CASE("from_counts: ps tasks first, the rest workers") {
  on_every_size([](const Comm& comm) {
    for (int ps = 0; ps < comm.size(); ++ps) {
      const ClusterSpec spec = ClusterSpec::from_counts(comm, ps);
      check_consistent(spec, comm);
      CHECK(spec.num_tasks("ps") == ps);
      CHECK(spec.has_job("ps") == (ps > 0));
      CHECK(spec.num_tasks("worker") == comm.size() - ps);
      CHECK(spec.job_names() == (ps > 0 ? std::vector<std::string>{"ps", "worker"}
                                        : std::vector<std::string>{"worker"}));
      // One node: ps:i is rank i, worker:j is rank ps + j.
      for (int i = 0; i < ps; ++i) CHECK(spec.rank_of("ps", i) == i);
      for (int j = 0; j < comm.size() - ps; ++j) CHECK(spec.rank_of("worker", j) == ps + j);
      CHECK(spec.node_of(0) == spec.node_of(comm.size() - 1));
    }
  });
}

TEST_CASE("from_counts refuses counts that leave no worker, or differ between ranks") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    check_fails_everywhere(
        comm, [&] { ClusterSpec::from_counts(comm, n); },
        std::to_string(n) +
            " ps tasks leave no rank for the worker job: the "
            "job has " +
            std::to_string(n) + " ranks");
    check_fails_everywhere(
        comm, [&] { ClusterSpec::from_counts(comm, -1); }, "is negative");
    if (n > 2)
      check_fails_everywhere(
          comm, [&] { ClusterSpec::from_counts(comm, comm.rank() == 2 ? 1 : 0); },
          "ranks were given different ps task counts: rank 0 has '0' but "
          "rank 2 has '1'");
  });
}

TEST_CASE("from_job_names: MPMD, task index in rank order within each job") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    // Odd ranks are ps (when there are at least two ranks), the others workers.
    const std::string job = me % 2 == 1 ? "ps" : "worker";
    const ClusterSpec spec = ClusterSpec::from_job_names(comm, job);
    check_consistent(spec, comm);
    CHECK(spec.my_task() == TaskId{job, me / 2});
    CHECK(spec.num_tasks("ps") == n / 2);
    CHECK(spec.num_tasks("worker") == (n + 1) / 2);
    if (n >= 2) CHECK(spec.rank_of("ps", 0) == 1);
    CHECK(spec.rank_of("worker", 0) == 0);

    check_fails_everywhere(
        comm, [&] { ClusterSpec::from_job_names(comm, me == n - 1 ? "wroker" : "worker"); },
        "rank " + std::to_string(n - 1) + " asks for an unknown job name 'wroker'");
    check_fails_everywhere(
        comm, [&] { ClusterSpec::from_job_names(comm, me == 0 ? "" : "worker"); },
        "rank 0 has no job name");
    check_fails_everywhere(
        comm, [&] { ClusterSpec::from_job_names(comm, "ps"); },
        "cluster spec has no worker or chief job (jobs: ps)");
  });
}

TEST_CASE("from_ranks: any order of ranks, jobs kept in canonical order") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    // Workers in reverse rank order; the last rank is the chief when there are two or more.
    std::vector<int> workers;
    for (int r = n - 1 - (n > 1 ? 1 : 0); r >= 0; --r) workers.push_back(r);
    ClusterSpec::JobList jobs{{"worker", workers}, {"ps", {}}};
    if (n > 1) jobs.push_back({"chief", {n - 1}});
    ClusterSpec spec = ClusterSpec::from_ranks(comm, jobs);
    check_consistent(spec, comm);
    CHECK(spec.job_names() == (n > 1 ? std::vector<std::string>{"chief", "worker"}
                                     : std::vector<std::string>{"worker"}));
    CHECK_FALSE(spec.has_job("ps"));  // an empty job is left out
    CHECK(spec.num_tasks("ps") == 0);
    CHECK(spec.rank_of("worker", 0) == workers.front());
    if (n > 1) CHECK(spec.task_of(n - 1) == TaskId{"chief", 0});
    CHECK_THROWS_WITH_AS(spec.rank_of("worker", static_cast<int>(workers.size())),
                         doctest::Contains("cluster has no task worker:"), InvalidArgument);
    CHECK_THROWS_AS(spec.rank_of("ps", 0), InvalidArgument);
    CHECK_THROWS_AS(spec.task_of(n), InvalidArgument);
    CHECK(spec.table().find("job") == 0);
    CHECK(spec.table().find("worker") != std::string::npos);

    ClusterSpec moved = std::move(spec);
    CHECK(moved.world().size() == n);
  });
}

TEST_CASE("from_ranks: a chief task may train without a worker job, as in TensorFlow") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    std::vector<int> ps;
    for (int r = 1; r < n; ++r) ps.push_back(r);
    ClusterSpec spec = ClusterSpec::from_ranks(comm, {{"ps", ps}, {"chief", {0}}});
    check_consistent(spec, comm);
    CHECK(spec.job_names() == (n > 1 ? std::vector<std::string>{"chief", "ps"}
                                     : std::vector<std::string>{"chief"}));
    CHECK(spec.num_tasks("worker") == 0);
    CHECK(spec.task_of(0) == TaskId{"chief", 0});
  });
}

TEST_CASE("from_ranks errors are the same clear message on every rank") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    std::vector<int> one_more = all;
    one_more.push_back(n);
    const std::string ranks = std::to_string(n) + " ranks";

    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"ps", {0}}, {"worker", one_more}});
        },
        "cluster spec has " + std::to_string(n + 2) + " tasks but the job has " + ranks);
    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"worker", {}}});
        },
        "cluster spec has 0 tasks but the job has " + ranks);
    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"wrker", all}});
        },
        "unknown job name 'wrker' (known: chief, ps, worker, evaluator)");
    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"ps", all}});
        },
        "cluster spec has no worker or chief job (jobs: ps)");
    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"worker", all}, {"worker", {}}});
        },
        "names job 'worker' twice");
    std::vector<int> shifted = all;
    shifted.back() = n + 3;
    check_fails_everywhere(
        comm,
        [&] {
          ClusterSpec::from_ranks(comm, {{"worker", shifted}});
        },
        "puts worker:" + std::to_string(n - 1) + " on rank " + std::to_string(n + 3) +
            ", out of range for a job of " + ranks);
    if (n >= 2) {
      std::vector<int> workers(all.begin() + 1, all.end());
      workers.front() = 0;  // rank 0 twice, rank 1 nowhere
      check_fails_everywhere(
          comm,
          [&] {
            ClusterSpec::from_ranks(comm, {{"ps", {0}}, {"worker", workers}});
          },
          "puts rank 0 in two tasks: ps:0 and worker:0");
      check_fails_everywhere(
          comm,
          [&] {
            ClusterSpec::from_ranks(
                comm,
                {{"chief", {0, 1}}, {"worker", std::vector<int>(all.begin() + 2, all.end())}});
          },
          "2 chief tasks; at most one");
      // Rank 1 was handed another spec: every rank learns it.
      const ClusterSpec::JobList mine = comm.rank() == 1
                                            ? ClusterSpec::JobList{{"worker", all}, {"ps", {}}}
                                            : ClusterSpec::JobList{{"worker", all}};
      check_fails_everywhere(
          comm, [&] { ClusterSpec::from_ranks(comm, mine); },
          "ranks were given different cluster specs: rank 0 has 'worker:[");
    }
  });
}
