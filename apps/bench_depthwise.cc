// bench_depthwise: a DepthwiseConv2D's forward and backward pass for several depth multipliers at
// the same output channels, so that a multiplier above 1 can be compared with one filter per
// channel (docs/BENCHMARKS.md):
//
//   build/bin/bench_depthwise --multipliers=1,2,4 --outputs=64 --sizes=28,14
//
// For each image size and multiplier M: a 3x3 SAME DepthwiseConv2D from [size, size, outputs / M]
// to [size, size, outputs], a batch of --batch_size images, on --threads intra-op threads; the
// fastest of --repeats passes of each direction, in milliseconds, one table row each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/ops/depthwise.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/train/app.h"

COHORT_DEFINE_string(multipliers, "1,2,4", "depth multipliers, comma-separated (each must divide --outputs)");
COHORT_DEFINE_int(outputs, 64, "output channels of every layer", cohort::flags::Range{1, 1 << 16});
COHORT_DEFINE_string(sizes, "28,14", "image heights and widths, comma-separated");
COHORT_DEFINE_int(batch_size, 32, "images per pass", cohort::flags::Range{1, 1 << 16});
COHORT_DEFINE_int(threads, 1, "intra-op threads", cohort::flags::Range{1, 1024});
COHORT_DEFINE_int(repeats, 20, "passes of each direction (the fastest is printed)", cohort::flags::Range{1, 1 << 20});

namespace {

// The fastest of --repeats runs of `run`, in milliseconds.
template <typename F>
double fastest_ms(F&& run) {
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < FLAGS_repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

int Main(int, char**) {
  cohort::set_intra_op_threads(static_cast<int>(FLAGS_threads));
  const auto multipliers = cohort::flags::parse_size_list("multipliers", FLAGS_multipliers, 1 << 16);
  const auto sizes = cohort::flags::parse_size_list("sizes", FLAGS_sizes, 1 << 16);
  for (const std::int64_t m : multipliers)
    if (FLAGS_outputs % m != 0)
      throw cohort::InvalidArgument("--multipliers: " + std::to_string(m) + " does not divide --outputs=" +
                                    std::to_string(FLAGS_outputs));
  std::printf("| size | input channels | multiplier | forward: ms | backward: ms |\n|---:|---:|---:|---:|---:|\n");
  for (const std::int64_t size : sizes)
    for (const std::int64_t m : multipliers) {
      const std::int64_t channels = FLAGS_outputs / m;
      cohort::Graph graph;
      // Made by the library (not on this stack), so that the program also times other builds
      // of it.
      const std::unique_ptr<cohort::Layer> made =
          cohort::depthwise_conv2d("dw", 3, cohort::Activation::kNone, 1, cohort::Padding::kSame, m);
      cohort::Layer& layer = *made;
      layer.build(graph, {size, size, channels});
      graph.initialize(1);
      cohort::Tensor x({FLAGS_batch_size, size, size, channels}), y, dx;
      for (std::int64_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
      std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
      const double forward = fastest_ms([&] { layer.forward(x, y, {.training = true}); });
      const double backward = fastest_ms([&] { layer.backward(x, y, y, &dx, grads); });
      std::printf("| %lld | %lld | %lld | %.3f | %.3f |\n", static_cast<long long>(size),
                  static_cast<long long>(channels), static_cast<long long>(m), forward, backward);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
