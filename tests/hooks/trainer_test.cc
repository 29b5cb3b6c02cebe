// Trainer options on a real local-mode session: gradient accumulation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cohort/hooks/stop_at_step_hook.h"
#include "hooks/hook_test_support.h"

namespace cohort {

TEST_CASE("accumulating 4 batches of 8 is one step of the same 32 examples") {
  // 32 examples in all, no shuffle between the two: both see examples 0-31 in their first step.
  const data::Dataset data = data::synthetic(32, 5);
  TrainerOptions accumulated = test::trainer_options();
  accumulated.batch_size = 8;
  accumulated.accumulation_steps = 4;
  TrainerOptions large = test::trainer_options();
  large.batch_size = 32;
  CHECK(accumulated.examples_per_global_step(1) == 32);
  Graph graph_a, graph_b;
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  Trainer a(nullptr, graph_a, model, data, test::sgd(0.1), accumulated);
  Trainer b(nullptr, graph_b, model, data, test::sgd(0.1), large);
  for (Trainer* trainer : {&a, &b}) {
    MonitoredSession session(*trainer, test::with_hooks({StopAtStepHook::last(1)}));
    test::train(session);
  }
  CHECK(a.global_step() == 1);
  const auto va = graph_a.values(), vb = graph_b.values();
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, double(std::abs(va[i] - vb[i])));
  CHECK(worst < 1e-6);
  CHECK(a.examples_trained() == 32);
  // An epoch of 4 batches of 8 is one step: a second would need batches of the next epoch.
  TrainerOptions one_epoch = accumulated;
  one_epoch.epochs = 1;
  Graph graph_c;
  Trainer c(nullptr, graph_c, model, data, test::sgd(0.1), one_epoch);
  MonitoredSession session(c, test::with_hooks({StopAtStepHook::last(10)}));
  test::train(session);
  CHECK(c.global_step() == 1);
}

TEST_CASE("accumulation is refused with buckets sent during the backward pass, and below 1") {
  TrainerOptions options = test::trainer_options(Mode::kLocal);
  options.accumulation_steps = 0;
  Graph graph;
  const auto model = [](Graph& g) { return mlp(g, {8}); };
  CHECK_THROWS_AS(Trainer(nullptr, graph, model, data::synthetic(32, 5), test::sgd(), options), InvalidArgument);
  options.accumulation_steps = 2;
  options.replication.bucket_bytes = 1 << 20;
  Graph graph2;
  CHECK_THROWS_WITH_AS(Trainer(nullptr, graph2, model, data::synthetic(32, 5), test::sgd(), options),
                       doctest::Contains("gradient accumulation (2 batches a step) with buckets"),
                       InvalidArgument);
}

}  // namespace cohort
