#include "cohort/mpi/cluster_spec.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <sstream>

namespace cohort::mpi {
namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string list_text(const ClusterSpec::JobList& jobs) {
  std::string out;
  for (const auto& [job, ranks] : jobs) {
    if (!out.empty()) out += ' ';
    out += job + ":[";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(ranks[i]);
    }
    out += ']';
  }
  return out;
}

int job_order(const std::string& job) {
  const auto& known = known_job_names();
  return static_cast<int>(std::find(known.begin(), known.end(), job) - known.begin());
}

// Collective. Every rank must hold the same `text`; otherwise every rank throws the same error,
// naming the first rank that differs from rank 0 and what each of them has.
void agree(const Comm& world, const std::string& text, const std::string& what) {
  const std::string root_text = world.bcast_string(text, 0);
  const int first_differing = world.allreduce(root_text == text ? INT_MAX : world.rank(), Op::kMin);
  if (first_differing == INT_MAX) return;
  const std::string other = world.bcast_string(text, first_differing);
  throw InvalidArgument("ranks were given different " + what + ": rank 0 has '" + root_text +
                        "' but rank " + std::to_string(first_differing) + " has '" + other + "'");
}

// Deterministic, so that every rank, holding the same list, throws the same error.
ClusterSpec::JobList validate(const ClusterSpec::JobList& given, int world_size) {
  std::set<std::string> seen;
  ClusterSpec::JobList jobs;
  for (const auto& [job, ranks] : given) {
    if (!seen.insert(job).second)
      throw InvalidArgument("cluster spec names job '" + job + "' twice");
    if (job_order(job) == static_cast<int>(known_job_names().size()))
      throw InvalidArgument("cluster spec has an unknown job name '" + job +
                            "' (known: " + join_names(known_job_names()) + ")");
    if (!ranks.empty()) jobs.emplace_back(job, ranks);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return job_order(a.first) < job_order(b.first);
  });

  std::size_t tasks = 0;
  for (const auto& job : jobs) tasks += job.second.size();
  if (tasks != static_cast<std::size_t>(world_size))
    throw InvalidArgument("cluster spec has " + std::to_string(tasks) + " tasks but the job has " +
                          std::to_string(world_size) + " ranks; give each rank exactly one task");

  std::map<int, TaskId> owner;
  for (const auto& [job, ranks] : jobs) {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const TaskId task{job, static_cast<int>(i)};
      const int rank = ranks[i];
      if (rank < 0 || rank >= world_size)
        throw InvalidArgument("cluster spec puts " + task.to_string() + " on rank " +
                              std::to_string(rank) + ", out of range for a job of " +
                              std::to_string(world_size) + " ranks (0.." +
                              std::to_string(world_size - 1) + ")");
      if (const auto [it, inserted] = owner.emplace(rank, task); !inserted)
        throw InvalidArgument("cluster spec puts rank " + std::to_string(rank) + " in two tasks: " +
                              it->second.to_string() + " and " + task.to_string());
    }
  }

  std::vector<std::string> names;
  for (const auto& job : jobs) names.push_back(job.first);
  const auto find = [&](const std::string& name) {
    return std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == name; });
  };
  // The replicas are the chief's task and the workers: either job alone trains, as in TensorFlow.
  if (find("worker") == jobs.end() && find("chief") == jobs.end())
    throw InvalidArgument("cluster spec has no worker or chief job (jobs: " + join_names(names) +
                          "); at least one task must train");
  if (const auto chief = find("chief"); chief != jobs.end() && chief->second.size() > 1)
    throw InvalidArgument("cluster spec has " + std::to_string(chief->second.size()) +
                          " chief tasks; at most one is allowed");
  return jobs;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  COHORT_MPI_CALL(MPI_Get_processor_name(name, &length));
  return std::string(name, static_cast<std::size_t>(length));
}

}  // namespace

const std::vector<std::string>& known_job_names() {
  static const std::vector<std::string> names = {"chief", "ps", "worker", "evaluator"};
  return names;
}

std::string TaskId::to_string() const { return job + ":" + std::to_string(index); }

ClusterSpec ClusterSpec::from_ranks(const Comm& world, const JobList& jobs) {
  if (world.is_null()) throw InvalidArgument("ClusterSpec: the world communicator is null");
  agree(world, list_text(jobs), "cluster specs");
  return build(world, validate(jobs, world.size()));
}

ClusterSpec ClusterSpec::from_counts(const Comm& world, int ps_tasks) {
  if (world.is_null()) throw InvalidArgument("ClusterSpec: the world communicator is null");
  agree(world, std::to_string(ps_tasks), "ps task counts");
  const int size = world.size();
  if (ps_tasks < 0)
    throw InvalidArgument("ps task count " + std::to_string(ps_tasks) + " is negative");
  if (ps_tasks >= size)
    throw InvalidArgument(std::to_string(ps_tasks) +
                          " ps tasks leave no rank for the worker job: "
                          "the job has " +
                          std::to_string(size) + " ranks");

  // A node is named by its lowest rank; nodes are visited in that order.
  const Comm node = world.split_shared();
  const int leader = node.allreduce(world.rank(), Op::kMin);
  const std::vector<int> leaders = world.allgather(leader);
  std::map<int, std::vector<int>> node_ranks;
  for (int r = 0; r < size; ++r) node_ranks[leaders[static_cast<std::size_t>(r)]].push_back(r);
  std::vector<std::vector<int>> free;
  for (auto& entry : node_ranks) free.push_back(std::move(entry.second));

  std::vector<int> ps;
  std::vector<bool> is_ps(static_cast<std::size_t>(size), false);
  for (std::size_t n = 0; static_cast<int>(ps.size()) < ps_tasks; n = (n + 1) % free.size()) {
    std::vector<int>& ranks = free[n];
    if (ranks.empty()) continue;  // this node is all ps already; ps_tasks < size ends the loop
    ps.push_back(ranks.front());
    is_ps[static_cast<std::size_t>(ranks.front())] = true;
    ranks.erase(ranks.begin());
  }
  std::vector<int> workers;
  for (int r = 0; r < size; ++r)
    if (!is_ps[static_cast<std::size_t>(r)]) workers.push_back(r);
  return build(world, validate({{"ps", ps}, {"worker", workers}}, size));
}

ClusterSpec ClusterSpec::from_job_names(const Comm& world, const std::string& my_job) {
  if (world.is_null()) throw InvalidArgument("ClusterSpec: the world communicator is null");
  const std::vector<std::string> names = world.allgather_strings(my_job);
  JobList jobs;
  for (std::size_t r = 0; r < names.size(); ++r) {
    const std::string& job = names[r];
    if (job.empty())
      throw InvalidArgument("rank " + std::to_string(r) +
                            " has no job name; in an MPMD launch "
                            "every rank needs one (known: " +
                            join_names(known_job_names()) + ")");
    if (job_order(job) == static_cast<int>(known_job_names().size()))
      throw InvalidArgument("rank " + std::to_string(r) + " asks for an unknown job name '" + job +
                            "' (known: " + join_names(known_job_names()) + ")");
    auto it = std::find_if(jobs.begin(), jobs.end(), [&](const auto& j) { return j.first == job; });
    if (it == jobs.end()) it = jobs.insert(jobs.end(), {job, {}});
    it->second.push_back(static_cast<int>(r));
  }
  return build(world, validate(jobs, static_cast<int>(names.size())));
}

ClusterSpec ClusterSpec::build(const Comm& world, JobList jobs) {
  ClusterSpec spec;
  spec.world_ = world.dup();
  spec.my_rank_ = spec.world_.rank();
  spec.tasks_.resize(static_cast<std::size_t>(spec.world_.size()));
  int my_color = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    spec.job_names_.push_back(jobs[j].first);
    const std::vector<int>& ranks = jobs[j].second;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      spec.tasks_[static_cast<std::size_t>(ranks[i])] = TaskId{jobs[j].first, static_cast<int>(i)};
      if (ranks[i] == spec.my_rank_) my_color = static_cast<int>(j);
    }
  }
  spec.jobs_ = std::move(jobs);
  spec.job_comm_ = spec.world_.split(my_color, spec.my_task().index);
  spec.nodes_ = spec.world_.allgather_strings(processor_name());
  return spec;
}

bool ClusterSpec::has_job(const std::string& job) const {
  return std::find(job_names_.begin(), job_names_.end(), job) != job_names_.end();
}

const std::vector<int>& ClusterSpec::ranks_of(const std::string& job) const {
  static const std::vector<int> none;
  for (const auto& [name, ranks] : jobs_)
    if (name == job) return ranks;
  return none;
}

int ClusterSpec::num_tasks(const std::string& job) const {
  return static_cast<int>(ranks_of(job).size());
}

int ClusterSpec::rank_of(const std::string& job, int task) const {
  const std::vector<int>& ranks = ranks_of(job);
  if (task < 0 || task >= static_cast<int>(ranks.size()))
    throw InvalidArgument("cluster has no task " + job + ":" + std::to_string(task) + " (job '" +
                          job + "' has " + std::to_string(ranks.size()) + " tasks)");
  return ranks[static_cast<std::size_t>(task)];
}

const TaskId& ClusterSpec::task_of(int rank) const {
  if (rank < 0 || rank >= size())
    throw InvalidArgument("cluster has no rank " + std::to_string(rank) + " (it has " +
                          std::to_string(size()) + " ranks)");
  return tasks_[static_cast<std::size_t>(rank)];
}

const std::string& ClusterSpec::node_of(int rank) const {
  task_of(rank);  // range check
  return nodes_[static_cast<std::size_t>(rank)];
}

std::string ClusterSpec::table() const {
  std::size_t job_width = 3;
  for (const auto& job : jobs_) job_width = std::max(job_width, job.first.size());
  std::ostringstream out;
  const auto row = [&](const std::string& job, const std::string& task, const std::string& rank,
                       const std::string& node) {
    out << job << std::string(job_width + 2 - job.size(), ' ') << task
        << std::string(task.size() < 6 ? 6 - task.size() : 1, ' ') << rank
        << std::string(rank.size() < 6 ? 6 - rank.size() : 1, ' ') << node << '\n';
  };
  row("job", "task", "rank", "node");
  for (const auto& [job, ranks] : jobs_)
    for (std::size_t i = 0; i < ranks.size(); ++i)
      row(job, std::to_string(i), std::to_string(ranks[i]),
          nodes_[static_cast<std::size_t>(ranks[i])]);
  return out.str();
}

std::string ClusterSpec::to_string() const { return list_text(jobs_); }

}  // namespace cohort::mpi
