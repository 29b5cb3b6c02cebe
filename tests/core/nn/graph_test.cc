#include "cohort/core/nn/graph.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"

using cohort::Graph;
using cohort::Initializer;
using cohort::ReplicaDeviceSetter;
using cohort::ReplicaDeviceSetterOptions;
using cohort::Shape;

namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("variables are laid out contiguously in creation order") {
  Graph g;
  g.get_variable("dense/kernel", {4, 3}, Initializer::glorot_uniform());
  g.get_variable("dense/bias", {3}, Initializer::zeros());
  g.get_variable("conv/filter", {3, 3, 2, 5}, Initializer::he_normal());
  g.get_variable("scalar", {}, Initializer::constant(1.0f));
  REQUIRE(g.variables().size() == 4);
  std::int64_t offset = 0;
  for (const auto& v : g.variables()) {
    CHECK(v.offset == offset);
    CHECK(v.size == cohort::num_elements(v.shape));
    offset += v.size;
  }
  CHECK(g.num_parameters() == 12 + 3 + 90 + 1);
  CHECK(g.variables()[2].name == "conv/filter");
  CHECK(g.variables()[2].offset == 15);
  CHECK(g.find("dense/bias") == &g.variables()[1]);
  CHECK(g.find("missing") == nullptr);
}

TEST_CASE("get_variable reuses a variable of the same name and shape") {
  Graph g;
  const std::int64_t offset = g.get_variable("w", {2, 2}, Initializer::zeros()).offset;
  g.get_variable("b", {2}, Initializer::zeros());
  // A second tower asks again, even with another initializer: the first one stays.
  const cohort::Variable& again = g.get_variable("w", {2, 2}, Initializer::he_normal());
  CHECK(again.offset == offset);
  CHECK(again.initializer == Initializer::zeros());
  CHECK(g.variables().size() == 2);
  CHECK(g.num_parameters() == 6);
}

TEST_CASE("a variable by name: found, or an error naming the graph's variables") {
  Graph g;
  CHECK_THROWS_WITH_AS(g.variable("w"), "no variable 'w' in the graph (variables: none)", cohort::InvalidArgument);
  g.get_variable("dense/kernel", {2, 2}, Initializer::zeros());
  g.get_variable("dense/bias", {2}, Initializer::zeros());
  CHECK(&g.variable("dense/bias") == g.find("dense/bias"));
  CHECK(g.find("dense/kernels") == nullptr);
  CHECK_THROWS_WITH_AS(g.variable("dense/kernels"),
                       "no variable 'dense/kernels' in the graph (variables: dense/kernel, dense/bias)",
                       cohort::InvalidArgument);
  for (int i = 0; i < 12; ++i) g.get_variable("v" + std::to_string(i), {1}, Initializer::zeros());
  CHECK_THROWS_WITH_AS(g.variable("x"), doctest::Contains("v9, ... (14 in all))"), cohort::InvalidArgument);
}

TEST_CASE("a shape mismatch names the variable and both shapes") {
  Graph g;
  g.get_variable("dense/kernel", {784, 256}, Initializer::glorot_uniform());
  CHECK_THROWS_WITH_AS(g.get_variable("dense/kernel", {784, 128}, Initializer::glorot_uniform()),
                       "Graph: variable \"dense/kernel\" exists with shape [784, 256], asked "
                       "for [784, 128]",
                       cohort::InvalidArgument);
  CHECK_THROWS_AS(g.get_variable("", {1}, Initializer::zeros()), cohort::InvalidArgument);
  CHECK_THROWS_AS(g.get_variable("neg", {-1}, Initializer::zeros()), cohort::InvalidArgument);
  CHECK(g.variables().size() == 1);
}

TEST_CASE("values() is allocated once, zero-filled, and freezes the variable set") {
  Graph g;
  g.get_variable("a", {3}, Initializer::constant(2.0f));
  g.get_variable("b", {2, 2}, Initializer::constant(3.0f));
  const auto values = g.values();
  REQUIRE(values.size() == 7);
  for (float x : values) CHECK(x == 0.0f);
  CHECK(g.values().data() == values.data());
  CHECK(reinterpret_cast<std::uintptr_t>(values.data()) % 64 == 0);
  // Reuse is still fine; creation is not.
  CHECK_NOTHROW(g.get_variable("a", {3}, Initializer::zeros()));
  CHECK_THROWS_WITH_AS(g.get_variable("c", {1}, Initializer::zeros()),
                       "Graph: cannot create variable \"c\" after the parameter buffer was "
                       "allocated (values() was already used)",
                       cohort::Error);
  const Graph& cg = g;
  CHECK(cg.values().data() == values.data());
  CHECK(g.values(*g.find("b")).data() == values.data() + 3);
  CHECK(g.values(*g.find("b")).size() == 4);
}

TEST_CASE("parameters beyond the machine's memory are refused in words, not met as a kill") {
  Graph g;
  // 2^40 floats (4.4 TB), twice over with their gradients: more than any machine this runs on.
  g.get_variable("huge", {1 << 20, 1 << 20}, Initializer::zeros());
  try {
    static_cast<void>(g.values());
    FAIL("a 4.4 TB parameter buffer was allocated");
  } catch (const cohort::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("the model's 1099511627776 parameters (4.4e+03 GB as float32) and as many "
                       "gradients exceed this machine's memory (") == 0);
  }
}

TEST_CASE("initialize fills each variable from its initializer") {
  Graph g;
  g.get_variable("one", {2}, Initializer::constant(1.0f));
  g.get_variable("kernel", {100, 50}, Initializer::glorot_uniform());
  g.get_variable("zero", {3}, Initializer::zeros());
  g.initialize(7);
  CHECK(copy(g.values(*g.find("one"))) == std::vector<float>{1.0f, 1.0f});
  CHECK(copy(g.values(*g.find("zero"))) == std::vector<float>(3, 0.0f));
  const auto kernel = g.values(*g.find("kernel"));
  const double limit = std::sqrt(6.0 / 150.0);
  CHECK(std::all_of(kernel.begin(), kernel.end(), [&](float x) { return std::abs(x) <= limit; }));
  CHECK(std::any_of(kernel.begin(), kernel.end(), [](float x) { return x != 0.0f; }));
  // Exactly Initializer::fill with the derived seed.
  std::vector<float> expected(5000);
  Initializer::glorot_uniform().fill({100, 50}, Graph::variable_seed(7, "kernel"), expected);
  CHECK(copy(kernel) == expected);
}

TEST_CASE("initialize is deterministic and independent of creation order") {
  Graph a, b;
  a.get_variable("x", {10, 10}, Initializer::he_normal());
  a.get_variable("y", {10, 10}, Initializer::he_normal());
  b.get_variable("y", {10, 10}, Initializer::he_normal());
  b.get_variable("x", {10, 10}, Initializer::he_normal());
  a.initialize(99);
  b.initialize(99);
  CHECK(copy(a.values(*a.find("x"))) == copy(b.values(*b.find("x"))));
  CHECK(copy(a.values(*a.find("y"))) == copy(b.values(*b.find("y"))));
  // Same shape and initializer, different names: different values.
  CHECK(copy(a.values(*a.find("x"))) != copy(a.values(*a.find("y"))));
  // Another seed: other values; the same seed again: the same.
  const auto first = copy(a.values());
  a.initialize(100);
  CHECK(copy(a.values()) != first);
  a.initialize(99);
  CHECK(copy(a.values()) == first);
}

TEST_CASE("variable seeds are stable across runs and builds") {
  // FNV-1a of the name mixed with SplitMix64's finaliser, computed independently: these numbers
  // must never change, or a fresh initialisation stops being reproducible.
  CHECK(Graph::variable_seed(42, "dense/kernel") == 0x2eff5733ad5c930bull);
  CHECK(Graph::variable_seed(0, "") == 0x5b21f68ffa77f14cull);
  CHECK(Graph::variable_seed(1, "dense_1/kernel") != Graph::variable_seed(1, "dense_2/kernel"));
  CHECK(Graph::variable_seed(1, "w") != Graph::variable_seed(2, "w"));
}

TEST_CASE("each new variable is placed through the device setter") {
  ReplicaDeviceSetterOptions options;
  options.ps_tasks = 2;
  options.worker_device = "/job:worker/task:1";
  options.max_shard_bytes = 400;
  Graph g{ReplicaDeviceSetter(options)};
  g.get_variable("a", {10}, Initializer::zeros());
  g.get_variable("b", {10}, Initializer::zeros());
  g.get_variable("a", {10}, Initializer::zeros());  // reuse: not placed again
  g.get_variable("big", {4, 50}, Initializer::zeros());
  CHECK(g.find("a")->placement.device.to_string() == "/job:ps/task:0");
  CHECK(g.find("b")->placement.device.to_string() == "/job:ps/task:1");
  CHECK(g.find("big")->placement.parts.size() == 2);
  CHECK(g.device_setter().bytes_per_ps() == std::vector<std::int64_t>{440, 440});
  CHECK(g.device_setter().op_device().to_string() == "/job:worker/task:1");

  Graph local;
  CHECK_FALSE(local.get_variable("w", {2}, Initializer::zeros()).placement.on_ps());
}
