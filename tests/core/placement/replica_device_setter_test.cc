#include "cohort/core/placement/replica_device_setter.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"

namespace cohort {
COHORT_DECLARE_int(max_shard_bytes);
COHORT_DECLARE_string(placement_strategy);
COHORT_DECLARE_bool(log_device_placement);
}  // namespace cohort
using cohort::FLAGS_log_device_placement;
using cohort::FLAGS_max_shard_bytes;
using cohort::FLAGS_placement_strategy;

using cohort::PlacementStrategy;
using cohort::ReplicaDeviceSetter;
using cohort::ReplicaDeviceSetterOptions;
using cohort::Shape;
using cohort::VariablePlacement;

namespace {

ReplicaDeviceSetter setter(int ps_tasks, PlacementStrategy strategy = PlacementStrategy::kRoundRobin,
                           std::int64_t max_shard_bytes = 0) {
  ReplicaDeviceSetterOptions options;
  options.ps_tasks = ps_tasks;
  options.worker_device = "/job:worker/task:0";
  options.strategy = strategy;
  options.max_shard_bytes = max_shard_bytes;
  return ReplicaDeviceSetter(options);
}

// The parts of a placement cover [0, size) exactly, in order, without overlap, on distinct ps
// tasks, each starting on a row boundary.
void check_parts(const VariablePlacement& p, const Shape& shape, int ps_tasks) {
  const std::int64_t size = cohort::num_elements(shape);
  const std::int64_t row_size = shape.empty() || shape[0] == 0 ? 1 : size / shape[0];
  REQUIRE_FALSE(p.parts.empty());
  std::int64_t next = 0;
  std::set<int> tasks;
  for (const auto& part : p.parts) {
    CHECK(part.begin == next);
    CHECK(part.end > part.begin);
    CHECK(part.begin % row_size == 0);
    CHECK(part.end % row_size == 0);
    CHECK(part.ps_task >= 0);
    CHECK(part.ps_task < ps_tasks);
    tasks.insert(part.ps_task);
    next = part.end;
  }
  CHECK(next == size);
  CHECK(tasks.size() == p.parts.size());
}

}  // namespace

TEST_CASE("round robin puts variables on ps 0, 1, 0, 1, ... in creation order") {
  ReplicaDeviceSetter s = setter(2);
  const char* expected[] = {"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0",
                            "/job:ps/task:1", "/job:ps/task:0"};
  for (int i = 0; i < 5; ++i) {
    const VariablePlacement p = s.place("v" + std::to_string(i), {10, 10});
    CHECK(p.on_ps());
    CHECK_FALSE(p.partitioned());
    REQUIRE(p.parts.size() == 1);
    CHECK(p.parts[0].ps_task == i % 2);
    CHECK(p.parts[0].begin == 0);
    CHECK(p.parts[0].end == 100);
    CHECK(p.device.to_string() == expected[i]);
  }
  CHECK(s.bytes_per_ps() == std::vector<std::int64_t>{1200, 800});
  CHECK(s.op_device().to_string() == "/job:worker/task:0");
  CHECK(s.ps_tasks() == 2);
}

TEST_CASE("round robin ignores size; three ps tasks cycle 0, 1, 2") {
  ReplicaDeviceSetter s = setter(3);
  CHECK(s.place("big", {1000, 1000}).parts[0].ps_task == 0);
  CHECK(s.place("small", {1}).parts[0].ps_task == 1);
  CHECK(s.place("scalar", {}).parts[0].ps_task == 2);
  CHECK(s.place("next", {2}).parts[0].ps_task == 0);
  CHECK(s.bytes_per_ps() == std::vector<std::int64_t>{4000000 + 8, 4, 4});
}

TEST_CASE("greedy puts each variable on the least-loaded ps, lowest index on ties") {
  ReplicaDeviceSetter s = setter(3, PlacementStrategy::kGreedyBytes);
  CHECK(s.place("a", {100}).parts[0].ps_task == 0);  // all empty: ps 0
  CHECK(s.place("b", {300}).parts[0].ps_task == 1);  // loads 400, 0, 0
  CHECK(s.place("c", {50}).parts[0].ps_task == 2);   // loads 400, 1200, 0
  CHECK(s.place("d", {10}).parts[0].ps_task == 2);   // loads 400, 1200, 200
  CHECK(s.place("e", {200}).parts[0].ps_task == 2);  // loads 400, 1200, 240
  CHECK(s.place("f", {1}).parts[0].ps_task == 0);    // loads 400, 1200, 1040
  CHECK(s.bytes_per_ps() == std::vector<std::int64_t>{404, 1200, 1040});
}

TEST_CASE("greedy balances better than round robin on uneven sizes") {
  const Shape sizes[] = {{1000}, {10}, {1000}, {10}, {1000}, {10}};
  ReplicaDeviceSetter rr = setter(2), greedy = setter(2, PlacementStrategy::kGreedyBytes);
  for (int i = 0; i < 6; ++i) {
    rr.place("v" + std::to_string(i), sizes[i]);
    greedy.place("v" + std::to_string(i), sizes[i]);
  }
  const auto spread = [](const std::vector<std::int64_t>& b) {
    return *std::max_element(b.begin(), b.end()) - *std::min_element(b.begin(), b.end());
  };
  CHECK(rr.bytes_per_ps() == std::vector<std::int64_t>{12000, 120});
  CHECK(spread(greedy.bytes_per_ps()) < spread(rr.bytes_per_ps()));
  CHECK(greedy.bytes_per_ps() == std::vector<std::int64_t>{8040, 4080});
}

TEST_CASE("a variable over max_shard_bytes is partitioned on row boundaries over distinct ps") {
  // 1000 x 64 floats = 256000 bytes; rows are 256 bytes; 100000-byte shards hold 390 rows, so
  // ceil(1000 / 390) = 3 parts of 334, 333, 333 rows.
  ReplicaDeviceSetter s = setter(4, PlacementStrategy::kRoundRobin, 100000);
  const Shape shape{1000, 64};
  const VariablePlacement p = s.place("embedding", shape);
  CHECK(p.partitioned());
  REQUIRE(p.parts.size() == 3);
  check_parts(p, shape, 4);
  CHECK(p.parts[0].end == 334 * 64);
  CHECK(p.parts[1].end == 667 * 64);
  CHECK(p.parts[0].ps_task == 0);
  CHECK(p.parts[1].ps_task == 1);
  CHECK(p.parts[2].ps_task == 2);
  CHECK(p.device.to_string() == "/job:ps/task:0");
  // Round robin continues after the parts.
  CHECK(s.place("bias", {64}).parts[0].ps_task == 3);
  CHECK(s.place("next", {64}).parts[0].ps_task == 0);
  std::int64_t total = 0;
  for (std::int64_t b : s.bytes_per_ps()) total += b;
  CHECK(total == 256000 + 2 * 256);
}

TEST_CASE("partitioning is capped at ps_tasks parts and at the number of rows") {
  SUBCASE("cap at ps tasks") {
    ReplicaDeviceSetter s = setter(2, PlacementStrategy::kRoundRobin, 1024);
    const Shape shape{100, 100};  // 40000 bytes: would be 40 shards
    const VariablePlacement p = s.place("w", shape);
    REQUIRE(p.parts.size() == 2);
    check_parts(p, shape, 2);
    CHECK(p.parts[0].end == 50 * 100);
  }
  SUBCASE("a single row is never split") {
    ReplicaDeviceSetter s = setter(4, PlacementStrategy::kRoundRobin, 16);
    const VariablePlacement one_row = s.place("row", {1, 1000});
    CHECK(one_row.parts.size() == 1);
    const VariablePlacement vector = s.place("vec", {3});  // 12 bytes: fits
    CHECK(vector.parts.size() == 1);
    const VariablePlacement rows = s.place("rows", {3, 100});  // 3 rows of 400 bytes
    REQUIRE(rows.parts.size() == 3);
    check_parts(rows, {3, 100}, 4);
  }
  SUBCASE("rank 1 splits on elements") {
    ReplicaDeviceSetter s = setter(3, PlacementStrategy::kRoundRobin, 4000);
    const VariablePlacement p = s.place("bias", {2500});  // 10000 bytes -> 3 parts
    REQUIRE(p.parts.size() == 3);
    check_parts(p, {2500}, 3);
  }
  SUBCASE("one ps task never partitions") {
    ReplicaDeviceSetter s = setter(1, PlacementStrategy::kRoundRobin, 16);
    const VariablePlacement p = s.place("w", {100, 100});
    CHECK(p.parts.size() == 1);
    CHECK(p.parts[0].end == 10000);
  }
  SUBCASE("max_shard_bytes 0 never partitions") {
    ReplicaDeviceSetter s = setter(4, PlacementStrategy::kRoundRobin, 0);
    CHECK(s.place("w", {1000, 1000}).parts.size() == 1);
  }
}

TEST_CASE("greedy partitions go to the least-loaded distinct ps tasks") {
  ReplicaDeviceSetter s = setter(3, PlacementStrategy::kGreedyBytes, 800);
  s.place("a", {100});  // 400 bytes on ps 0
  s.place("b", {50});   // 200 bytes on ps 1
  const Shape shape{4, 100};  // 1600 bytes -> 2 parts of 800
  const VariablePlacement p = s.place("w", shape);
  REQUIRE(p.parts.size() == 2);
  check_parts(p, shape, 3);
  CHECK(p.parts[0].ps_task == 2);  // empty
  CHECK(p.parts[1].ps_task == 1);  // 200 < 400
  CHECK(s.bytes_per_ps() == std::vector<std::int64_t>{400, 1000, 800});
}

TEST_CASE("without ps tasks everything is on the worker") {
  ReplicaDeviceSetter local;
  const VariablePlacement p = local.place("w", {3, 4});
  CHECK_FALSE(p.on_ps());
  REQUIRE(p.parts.size() == 1);
  CHECK(p.parts[0].ps_task == -1);
  CHECK(p.parts[0].end == 12);
  CHECK(p.device.empty());
  CHECK(local.ps_tasks() == 0);
  CHECK(local.bytes_per_ps().empty());
  CHECK(local.op_device().empty());

  ReplicaDeviceSetter worker = setter(0, PlacementStrategy::kRoundRobin, 16);
  const VariablePlacement q = worker.place("big", {100, 100});
  CHECK_FALSE(q.on_ps());
  CHECK(q.parts.size() == 1);
  CHECK(q.device.to_string() == "/job:worker/task:0");
  CHECK(VariablePlacement{}.on_ps() == false);
}

TEST_CASE("the setter is a value: a copy carries the state and then diverges") {
  ReplicaDeviceSetter a = setter(2);
  a.place("x", {1});
  ReplicaDeviceSetter b = a;
  CHECK(b.place("y", {1}).parts[0].ps_task == 1);
  CHECK(a.place("y", {1}).parts[0].ps_task == 1);
  CHECK(b.place("z", {1}).parts[0].ps_task == 0);
  CHECK(a.bytes_per_ps() == std::vector<std::int64_t>{4, 4});
}

TEST_CASE("table lists every variable with shape, bytes and device, then the ps loads") {
  ReplicaDeviceSetter s = setter(2, PlacementStrategy::kRoundRobin, 1000);
  s.place("dense/kernel", {10, 20});   // 800 bytes, ps 0
  s.place("dense/bias", {20});         // 80 bytes, ps 1
  s.place("embedding", {6, 100});      // 2400 bytes, 2 parts: ps 0 rows 0-3, ps 1 rows 3-6
  const std::string t = s.table();
  CAPTURE(t);
  CHECK(t ==
        "variable      shape     bytes  device\n"
        "dense/kernel  [10, 20]    800  /job:ps/task:0\n"
        "dense/bias    [20]         80  /job:ps/task:1\n"
        "embedding     [6, 100]   2400  /job:ps/task:0[0:3) /job:ps/task:1[3:6)\n"
        "/job:ps/task:0: 2000 bytes\n"
        "/job:ps/task:1: 1280 bytes\n");

  ReplicaDeviceSetter local;
  local.place("w", {2});
  CHECK(local.table() ==
        "variable  shape  bytes  device\n"
        "w         [2]        8  (local)\n");
}

TEST_CASE("log_device_placement prints one line per variable to stderr") {
  ReplicaDeviceSetterOptions options;
  options.ps_tasks = 2;
  options.max_shard_bytes = 16;
  options.log_device_placement = true;
  ReplicaDeviceSetter s(options);

  // Point stderr at a temporary file for the two placements.
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  std::fflush(stderr);
  const int saved = dup(fileno(stderr));
  dup2(fileno(capture), fileno(stderr));
  s.place("w", {2, 3});
  s.place("b", {3});
  std::fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);

  std::rewind(capture);
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, capture)) text += buffer;
  std::fclose(capture);
  CAPTURE(text);
  CHECK(text.find("] variable w [2, 3] (24 bytes) -> /job:ps/task:0[0:1) /job:ps/task:1[1:2)\n") !=
        std::string::npos);
  CHECK(text.find("] variable b [3] (12 bytes) -> /job:ps/task:0\n") != std::string::npos);
}

TEST_CASE("bad arguments are InvalidArgument") {
  ReplicaDeviceSetter s = setter(2);
  s.place("w", {2});
  CHECK_THROWS_WITH_AS(s.place("w", {2}), "ReplicaDeviceSetter: variable \"w\" is placed twice",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(s.place("", {2}), "ReplicaDeviceSetter: empty variable name",
                       cohort::InvalidArgument);
  CHECK_THROWS_WITH_AS(s.place("n", {2, -1}),
                       "ReplicaDeviceSetter: variable \"n\" has a negative dimension in shape "
                       "[2, -1]",
                       cohort::InvalidArgument);
  ReplicaDeviceSetterOptions options;
  options.ps_tasks = -1;
  CHECK_THROWS_AS(ReplicaDeviceSetter{options}, cohort::InvalidArgument);
  options.ps_tasks = 1;
  options.max_shard_bytes = -5;
  CHECK_THROWS_AS(ReplicaDeviceSetter{options}, cohort::InvalidArgument);
  options.max_shard_bytes = 0;
  options.worker_device = "/job:worker/tsk:0";
  CHECK_THROWS_WITH_AS(ReplicaDeviceSetter{options},
                       "bad device spec \"/job:worker/tsk:0\": unknown field \"tsk\"",
                       cohort::InvalidArgument);
}

TEST_CASE("options from flags") {
  const auto saved_strategy = FLAGS_placement_strategy;
  const auto saved_bytes = FLAGS_max_shard_bytes;
  const auto saved_log = FLAGS_log_device_placement;
  CHECK(FLAGS_max_shard_bytes == 64 << 20);
  CHECK(FLAGS_placement_strategy == "round_robin");
  CHECK_FALSE(FLAGS_log_device_placement);

  auto options = cohort::replica_device_setter_options_from_flags(3, "/job:worker/task:1");
  CHECK(options.ps_tasks == 3);
  CHECK(options.worker_device == "/job:worker/task:1");
  CHECK(options.strategy == PlacementStrategy::kRoundRobin);
  CHECK(options.max_shard_bytes == 64 << 20);

  FLAGS_placement_strategy = "greedy";
  FLAGS_max_shard_bytes = 0;
  FLAGS_log_device_placement = true;
  options = cohort::replica_device_setter_options_from_flags(2, "");
  CHECK(options.strategy == PlacementStrategy::kGreedyBytes);
  CHECK(options.max_shard_bytes == 0);
  CHECK(options.log_device_placement);

  FLAGS_placement_strategy = "random";
  CHECK_THROWS_WITH_AS(cohort::replica_device_setter_options_from_flags(2, ""),
                       "flag --placement_strategy: unknown value \"random\" (expected round_robin "
                       "or greedy)",
                       cohort::InvalidArgument);
  FLAGS_placement_strategy = "round_robin";
  FLAGS_max_shard_bytes = -1;
  CHECK_THROWS_WITH_AS(cohort::replica_device_setter_options_from_flags(2, ""),
                       "flag --max_shard_bytes: -1 is negative (0 turns partitioning off)",
                       cohort::flags::FlagError);

  FLAGS_placement_strategy = saved_strategy;
  FLAGS_max_shard_bytes = saved_bytes;
  FLAGS_log_device_placement = saved_log;
}
