#include "cohort/core/dist/replication.h"

#include "cohort/core/base/error.h"
#include "cohort/core/dist/modes/modes.h"

namespace cohort {

Mode parse_mode(const std::string& name) {
  if (name == "local") return Mode::kLocal;
  if (name == "async") return Mode::kAsync;
  if (name == "sync") return Mode::kSync;
  if (name == "ssp") return Mode::kSsp;
  if (name == "allreduce") return Mode::kAllreduce;
  throw InvalidArgument("unknown mode '" + name + "' (known: sync, async, ssp, allreduce, local)");
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::kLocal: return "local";
    case Mode::kAsync: return "async";
    case Mode::kSync: return "sync";
    case Mode::kSsp: return "ssp";
    case Mode::kAllreduce: return "allreduce";
  }
  return "?";
}

Compression parse_compression(const std::string& name) {
  if (name == "none") return Compression::kNone;
  if (name == "bf16") return Compression::kBf16;
  throw InvalidArgument("unknown compression '" + name + "' (known: none, bf16)");
}

const char* to_string(Compression compression) {
  return compression == Compression::kBf16 ? "bf16" : "none";
}

std::unique_ptr<Replication> Replication::create(Server* server, Graph& graph,
                                                 Optimizer& optimizer,
                                                 const ReplicationOptions& options) {
  const std::string mode = to_string(options.mode);
  if (options.mode == Mode::kLocal) return modes::local(optimizer);
  if (!server) throw InvalidArgument(mode + " mode needs a cluster");
  if (!server->is_computing())
    throw InvalidArgument(mode + " mode runs on worker and chief tasks, not " +
                          server->task().to_string());
  if (options.prefetch && options.mode != Mode::kAsync)
    throw InvalidArgument("prefetch: async mode only (the " + mode +
                          " mode's parameters must follow its wait)");
  switch (options.mode) {
    case Mode::kAllreduce: return modes::allreduce(*server, graph, optimizer, options);
    case Mode::kAsync: return modes::async(*server, graph, optimizer, options);
    case Mode::kSsp: return modes::ssp(*server, graph, optimizer, options);
    case Mode::kSync: return modes::sync(*server, graph, optimizer, options);
    case Mode::kLocal: break;
  }
  return modes::local(optimizer);
}

namespace modes {

void share_optimizer_state(const mpi::Comm& replicas, Optimizer& optimizer, std::size_t parameters) {
  constexpr int kChief = 0;
  optimizer.prepare(parameters);
  for (const auto& [name, slot] : optimizer.slots()) replicas.bcast(slot, kChief);
  std::int64_t iterations = optimizer.iterations();
  replicas.bcast(std::span<std::int64_t>(&iterations, 1), kChief);
  optimizer.set_iterations(iterations);
}

}  // namespace modes
}  // namespace cohort
