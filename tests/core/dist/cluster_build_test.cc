// build_cluster: the three ways from options, the checks of --job_name/--task_index, and how
// ranks that disagree all get the same error.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cohort/core/dist/cluster.h"
#include "support/mpi_test.h"

using cohort::build_cluster;
using cohort::ClusterOptions;
using cohort::ClusterSpec;
using cohort::InvalidArgument;
using cohort::TaskId;
using cohort::mpi::Comm;

namespace {

void on_every_size(void (*body)(const Comm&)) {
  for (int n = 1; n <= Comm::world().size(); ++n) cohort::test::run_on_ranks(n, body);
}

std::string all_ranks(int n) {
  std::string ranks;
  for (int r = 0; r < n; ++r) {
    if (r) ranks += ',';
    ranks += std::to_string(r);
  }
  return ranks;
}

// Every rank must throw InvalidArgument whose message contains `expected`; returns the message.
std::string fails_everywhere(const Comm& comm, const ClusterOptions& options,
                             const std::string& expected) {
  std::string message = "(no error)";
  try {
    build_cluster(comm, options);
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
  CHECK(comm.allreduce(message.find(expected) != std::string::npos ? 0 : 1) == 0);
  return message;
}

}  // namespace

TEST_CASE("by default every rank is a worker") {
  on_every_size([](const Comm& comm) {
    const ClusterSpec spec = build_cluster(comm, {});
    CHECK(spec.job_names() == std::vector<std::string>{"worker"});
    CHECK(spec.my_task() == TaskId{"worker", comm.rank()});
  });
}

TEST_CASE("counts, MPMD job names and an explicit spec give the same cluster") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    if (n < 2) return;
    ClusterOptions counts;
    counts.ps_tasks = 1;
    ClusterOptions names;
    names.job_name = me == 0 ? "ps" : "worker";
    names.task_index = me == 0 ? 0 : me - 1;
    ClusterOptions explicit_spec;
    explicit_spec.cluster_spec = R"({"ps":[0],"worker":[)" + all_ranks(n).substr(2) + "]}";
    ClusterOptions checked = explicit_spec;
    checked.job_name = names.job_name;
    checked.task_index = names.task_index;
    for (const ClusterOptions& options : {counts, names, explicit_spec, checked}) {
      const ClusterSpec spec = build_cluster(comm, options);
      CHECK(spec.to_string() == "ps:[0] worker:[" + all_ranks(n).substr(2) + "]");
      CHECK(spec.my_task() == (me == 0 ? TaskId{"ps", 0} : TaskId{"worker", me - 1}));
    }
  });
}

TEST_CASE("--cluster_spec may name a file") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size();
    const int pid = comm.allreduce(comm.rank() == 0 ? static_cast<int>(getpid()) : 0);
    const auto path = std::filesystem::temp_directory_path() /
                      ("cohort_cluster_spec_test_" + std::to_string(pid) + ".json");
    if (comm.rank() == 0)
      std::ofstream(path) << R"({"cluster": {"worker": [)" << all_ranks(n) << "]}}\n";
    comm.barrier();
    ClusterOptions options;
    options.cluster_spec = path.string();
    const ClusterSpec spec = build_cluster(comm, options);
    CHECK(spec.num_tasks("worker") == n);
    comm.barrier();
    if (comm.rank() == 0) std::filesystem::remove(path);

    options.cluster_spec = (path.parent_path() / "no_such_cohort_spec.json").string();
    fails_everywhere(comm, options,
                     "is neither JSON (it does not start with '{') nor a readable file");
  });
}

TEST_CASE("a job or task index that does not match the rank is refused on every rank") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    ClusterOptions options;
    options.cluster_spec = R"({"worker":[)" + all_ranks(n) + "]}";
    options.job_name = me == n - 1 ? "ps" : "worker";
    fails_everywhere(comm, options,
                     "rank " + std::to_string(n - 1) +
                         " was given --job_name=ps but the cluster spec makes it worker:" +
                         std::to_string(n - 1));
    options.job_name = "worker";
    options.task_index = (me + 1) % n;
    if (n > 1)
      fails_everywhere(comm, options,
                       "rank 0 was given --job_name=worker --task_index=1 but it is worker:0");

    ClusterOptions mpmd;
    mpmd.job_name = "worker";
    mpmd.task_index = me == 0 ? 5 : me;
    fails_everywhere(comm, mpmd,
                     "rank 0 was given --job_name=worker --task_index=5 but it is worker:0");
  });
}

TEST_CASE("conflicting or inconsistent options fail the same way everywhere") {
  on_every_size([](const Comm& comm) {
    const int n = comm.size(), me = comm.rank();
    ClusterOptions options;
    options.job_name = "worker";
    options.ps_tasks = 1;
    fails_everywhere(comm, options, "--ps_tasks=1 conflicts with --job_name");

    ClusterOptions index_only;
    index_only.task_index = 0;
    fails_everywhere(comm, index_only, "--task_index=0 needs --job_name");

    ClusterOptions bad_json;
    bad_json.cluster_spec = R"({"worker":[0,)";
    const std::string message = fails_everywhere(comm, bad_json, "cluster spec is not valid JSON");
    CHECK(message.rfind("rank ", 0) != 0);  // every rank failed alike: no rank singled out

    if (n > 1) {
      ClusterOptions half;  // an MPMD launch where only rank 0 got --job_name
      half.job_name = me == 0 ? "ps" : "";
      fails_everywhere(
          comm, half,
          "ranks disagree on how to build the cluster: some use --job_name, others --ps_tasks");

      ClusterOptions one_bad;  // only the last rank has a broken spec
      one_bad.cluster_spec = me == n - 1 ? "{oops" : R"({"worker":[)" + all_ranks(n) + "]}";
      fails_everywhere(comm, one_bad,
                       "rank " + std::to_string(n - 1) + ": cluster spec is not valid JSON");
    }
  });
}
