#include "cohort/core/dist/cluster.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"

namespace cohort {

COHORT_DEFINE_string(cluster_spec, "",
                     "explicit cluster: JSON {\"ps\":[0],\"worker\":[1,2]} (job -> ranks) or a "
                     "TF_CONFIG-style {\"cluster\":{...}} (host:port entries bound to ranks in "
                     "order), or the path of a file holding it; wins over --job_name/--ps_tasks");
COHORT_DEFINE_string(job_name, "",
                     "this process's job (ps, worker, chief, evaluator); alone it builds the "
                     "cluster from an MPMD launch, with --cluster_spec it is checked");
COHORT_DEFINE_int(task_index, -1, "with --job_name: this process's task index, checked (-1: any)",
                  flags::Range{-1, 1 << 24});
COHORT_DEFINE_int(ps_tasks, 0,
                  "without --cluster_spec/--job_name: number of ps tasks (spread over nodes); the "
                  "other ranks are workers",
                  flags::Range{0, 1 << 24}, flags::kSameOnAllRanks);
COHORT_DEFINE_bool(print_cluster, true, "rank 0 prints the cluster table at start-up");

namespace {

using ordered_json = nlohmann::ordered_json;

// Collective. Local problems (a bad flag on one rank) become the same exception on every rank:
// the first rank with a problem tells the others what it is.
void throw_if_any(const mpi::Comm& world, const std::string& local_error) {
  const int failing = world.allreduce(local_error.empty() ? 0 : 1);
  if (failing == 0) return;
  const int first = world.allreduce(local_error.empty() ? INT_MAX : world.rank(), mpi::Op::kMin);
  std::string message = world.bcast_string(local_error, first);
  // When only some ranks fail, say which; a message about one rank names it already.
  if (failing < world.size() && message.rfind("rank ", 0) != 0)
    message = "rank " + std::to_string(first) + ": " + message;
  throw InvalidArgument(message);
}

// --cluster_spec holds JSON, or names a file that does.
std::string spec_text(const std::string& flag) {
  const auto first = flag.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && flag[first] == '{') return flag;
  std::error_code error;
  if (std::filesystem::is_directory(flag, error))
    throw InvalidArgument("--cluster_spec=" + quote(flag) +
                          " is a directory: give the JSON, or a file that holds it");
  std::ifstream in(flag);
  if (!in)
    throw InvalidArgument("--cluster_spec=" + quote(flag) +
                          " is neither JSON (it does not start with '{') nor a readable file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// How the flags describe the cluster: by task counts, by each rank's job name, or by a spec.
enum class Described { kCounts = 0, kJobNames = 1, kExplicit = 2 };

const char* mode_flag(Described mode) {
  switch (mode) {
    case Described::kCounts:
      return "--ps_tasks";
    case Described::kJobNames:
      return "--job_name";
    case Described::kExplicit:
      return "--cluster_spec";
  }
  return "?";
}

}  // namespace

ClusterOptions cluster_options_from_flags() {
  const auto to_int = [](std::int64_t value, const char* name) {
    if (value < INT_MIN || value > INT_MAX)
      throw InvalidArgument(std::string("--") + name + "=" + std::to_string(value) +
                            " is out of range");
    return static_cast<int>(value);
  };
  return ClusterOptions{FLAGS_cluster_spec, FLAGS_job_name, to_int(FLAGS_task_index, "task_index"),
                        to_int(FLAGS_ps_tasks, "ps_tasks")};
}

std::vector<std::pair<std::string, std::vector<int>>> parse_cluster_spec_json(
    const std::string& text, int world_size, std::map<int, std::string>* addresses,
    std::vector<std::string>* ignored) {
  ordered_json root;
  try {
    root = ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {  // syntax, or a number beyond a double
    throw InvalidArgument("cluster spec is not valid JSON (" + std::string(e.what()) +
                          "): " + quote(text));
  }
  if (!root.is_object())
    throw InvalidArgument("cluster spec must be a JSON object mapping jobs to lists: " +
                          quote(text));
  const bool tf_config = root.contains("cluster");
  const ordered_json& cluster = tf_config ? root["cluster"] : root;
  if (tf_config && ignored != nullptr)
    for (const auto& [key, value] : root.items())
      if (key != "cluster") ignored->push_back(key);
  if (!cluster.is_object())
    throw InvalidArgument("cluster spec: \"cluster\" must be an object mapping jobs to lists: " +
                          quote(text));
  if (cluster.empty()) throw InvalidArgument("cluster spec names no jobs: " + quote(text));

  enum class Form { kUnknown, kRanks, kAddresses } form = Form::kUnknown;
  int next_rank = 0;  // host:port entries bind to ranks in order
  std::vector<std::pair<std::string, std::vector<int>>> jobs;
  for (const auto& [job, entries] : cluster.items()) {
    if (!entries.is_array())
      throw InvalidArgument("cluster spec: job '" + job +
                            "' must be a list of ranks or host:port "
                            "strings, got " +
                            entries.dump() + ": " + quote(text));
    std::vector<int> ranks;
    for (const ordered_json& entry : entries) {
      const Form entry_form = entry.is_number_integer() ? Form::kRanks
                              : entry.is_string()       ? Form::kAddresses
                                                        : Form::kUnknown;
      if (entry_form == Form::kUnknown)
        throw InvalidArgument(
            "cluster spec: job '" + job + "' has entry " + entry.dump() +
            ", which is neither a rank (an integer) nor a host:port string: " + quote(text));
      if (form != Form::kUnknown && entry_form != form)
        throw InvalidArgument("cluster spec mixes ranks and host:port strings; use one form: " +
                              quote(text));
      form = entry_form;
      if (form == Form::kRanks) {
        const std::int64_t rank = entry.get<std::int64_t>();
        ranks.push_back(rank < INT_MIN   ? INT_MIN
                        : rank > INT_MAX ? INT_MAX
                                         : static_cast<int>(rank));
      } else {
        if (addresses != nullptr) (*addresses)[next_rank] = entry.get<std::string>();
        ranks.push_back(next_rank++);
      }
    }
    jobs.emplace_back(job, std::move(ranks));
  }
  if (form == Form::kAddresses && next_rank > world_size)
    throw InvalidArgument("cluster spec has " + std::to_string(next_rank) +
                          " tasks but the job has " + std::to_string(world_size) +
                          " ranks (host:port entries are bound to ranks in order): " + quote(text));
  return jobs;
}

namespace {

// What a TensorFlow user may expect to count and Cohort does not: a TF_CONFIG variable (the
// cluster comes from the ranks), a spec's host names that are not the nodes its tasks run on,
// and the keys beside "cluster" ("task": a rank's task follows from its rank). Warnings, once.
void warn_of_ignored_parts(const ClusterSpec& spec, const std::map<int, std::string>& addresses,
                           const std::vector<std::string>& ignored, bool explicit_spec) {
  const char* tf_config = std::getenv("TF_CONFIG");
  if (tf_config != nullptr && *tf_config != '\0' && !explicit_spec)
    std::fprintf(stderr, "warning: TF_CONFIG is set and ignored: the cluster is built from the MPI "
                         "ranks (--cluster_spec=\"$TF_CONFIG\" would take its jobs)\n");
  std::size_t elsewhere = 0;
  std::string first;
  for (const auto& [rank, address] : addresses) {
    const std::string host = address.substr(0, address.rfind(':'));
    const std::string& node = spec.node_of(rank);
    const auto names = [](const std::string& a, const std::string& b) {  // "h" names "h.site"
      return a == b || b.rfind(a + ".", 0) == 0;
    };
    if (host == "localhost" || host == "127.0.0.1" || names(host, node) || names(node, host)) continue;
    if (elsewhere++ == 0)
      first = spec.task_of(rank).to_string() + " is given as " + address + " but is rank " +
              std::to_string(rank) + " on node " + node;
  }
  if (elsewhere > 0)
    std::fprintf(stderr, "warning: cluster spec: %s%s: tasks are placed by rank, and host:port "
                         "entries only count them\n",
                 first.c_str(),
                 elsewhere > 1 ? (" (and " + std::to_string(elsewhere - 1) + " more)").c_str() : "");
  if (!ignored.empty()) {
    std::string keys;
    for (const std::string& key : ignored) keys += (keys.empty() ? "\"" : ", \"") + key + "\"";
    std::fprintf(stderr, "warning: cluster spec: %s beside \"cluster\" ignored: each rank's task "
                         "follows from its rank\n", keys.c_str());
  }
}

}  // namespace

ClusterSpec build_cluster(const mpi::Comm& world, const ClusterOptions& options) {
  const Described mode = !options.cluster_spec.empty() ? Described::kExplicit
                         : !options.job_name.empty()   ? Described::kJobNames
                                                       : Described::kCounts;
  std::string error;
  ClusterSpec::JobList jobs;
  std::map<int, std::string> addresses;
  std::vector<std::string> ignored;
  try {
    if (options.task_index < -1)
      throw InvalidArgument("--task_index=" + std::to_string(options.task_index) +
                            " is negative (-1 means unchecked)");
    if (options.task_index >= 0 && options.job_name.empty())
      throw InvalidArgument("--task_index=" + std::to_string(options.task_index) +
                            " needs --job_name: a task index is only checked within a job");
    if (options.ps_tasks != 0 && mode != Described::kCounts)
      throw InvalidArgument("--ps_tasks=" + std::to_string(options.ps_tasks) + " conflicts with " +
                            mode_flag(mode) + "; give one way to build the cluster");
    if (mode == Described::kExplicit) {
      const std::string text = spec_text(options.cluster_spec);
      try {
        jobs = parse_cluster_spec_json(text, world.size(), &addresses, &ignored);
      } catch (const InvalidArgument& e) {
        if (text == options.cluster_spec) throw;
        throw InvalidArgument("--cluster_spec=" + options.cluster_spec + ": " + e.what());
      }
    }
  } catch (const InvalidArgument& e) {
    error = e.what();
  }
  throw_if_any(world, error);

  const int lowest = world.allreduce(static_cast<int>(mode), mpi::Op::kMin);
  const int highest = world.allreduce(static_cast<int>(mode), mpi::Op::kMax);
  if (lowest != highest)
    throw InvalidArgument(std::string("ranks disagree on how to build the cluster: some use ") +
                          mode_flag(static_cast<Described>(highest)) + ", others " +
                          mode_flag(static_cast<Described>(lowest)) +
                          " (in an MPMD launch give every rank the same way)");

  ClusterSpec spec = mode == Described::kExplicit ? ClusterSpec::from_ranks(world, jobs)
                     : mode == Described::kJobNames
                         ? ClusterSpec::from_job_names(world, options.job_name)
                         : ClusterSpec::from_counts(world, options.ps_tasks);

  const TaskId& mine = spec.my_task();
  error.clear();
  if (!options.job_name.empty() && options.job_name != mine.job)
    error = "rank " + std::to_string(spec.my_rank()) + " was given --job_name=" + options.job_name +
            " but the cluster spec makes it " + mine.to_string();
  else if (options.task_index >= 0 && options.task_index != mine.index)
    error = "rank " + std::to_string(spec.my_rank()) + " was given --job_name=" + options.job_name +
            " --task_index=" + std::to_string(options.task_index) + " but it is " +
            mine.to_string() + " (task indices follow rank order within a job)";
  throw_if_any(spec.world(), error);
  if (spec.my_rank() == 0) warn_of_ignored_parts(spec, addresses, ignored, mode == Described::kExplicit);
  return spec;
}

ClusterSpec cluster_from_flags() {
  const mpi::Comm world = mpi::Comm::world();
  ClusterSpec spec = build_cluster(world, cluster_options_from_flags());
  set_process_label(spec.my_task().to_string() + " rank " + std::to_string(spec.my_rank()));
  if (FLAGS_print_cluster && spec.my_rank() == 0) {
    std::set<std::string> nodes;
    for (int r = 0; r < spec.size(); ++r) nodes.insert(spec.node_of(r));
    std::printf("cluster: %d task%s on %zu node%s\n%s", spec.size(), spec.size() == 1 ? "" : "s",
                nodes.size(), nodes.size() == 1 ? "" : "s", spec.table().c_str());
    std::fflush(stdout);
  }
  return spec;
}

}  // namespace cohort
