// bench_train: training throughput of the built-in models in one process (forward, backward and
// an SGD update per step, data preloaded), next to the machine's matrix-product ceiling.
// scripts/bench_compare.sh runs it beside PyTorch, in the same run.
// images/s is wall clock (the median of --windows timed windows after a warm-up); img/CPU-s
// divides by the CPU time the process used instead, which stays meaningful on a shared machine
// (with several threads it counts all of them, spinning included). "products only" (one thread)
// is the images/s of a step made of nothing but the matrix products one step made, replayed: how
// close the rest of the step lets the model come to its products' own speed. Convolution FLOPs
// are those of direct convolution, whichever algorithm runs. With --device=gpu the steps run on
// a GPU as a GPU tower runs them in train: parameters copied in, gradients copied out, the update
// on the host.
//
//   build/bin/bench_train --models=mlp,cnn,small_cnn --threads=1,2 --batch_size=64 --seconds=10
//   build/bin/bench_train --device=gpu --models=mlp,cnn --batch_size=256
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/flags.h"
#include "cohort/core/nn/cpu_level.h"
#include "cohort/core/nn/graph.h"
#include "cohort/core/nn/model.h"
#include "cohort/core/nn/models.h"
#include "cohort/core/nn/ops/gemm.h"
#include "cohort/core/nn/optimizer.h"
#include "cohort/core/nn/tensor.h"
#include "cohort/core/nn/tensor_eigen.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/placement/gpu_placement.h"
#include "cohort/core/train/app.h"

COHORT_DEFINE_string(models, "mlp,cnn,small_cnn", "comma-separated built-in models to time");
COHORT_DEFINE_string(threads, "1", "comma-separated intra-op thread counts to time");
COHORT_DEFINE_int(batch_size, 64, "examples per step", cohort::flags::Range{1, 1 << 20});
COHORT_DEFINE_float(seconds, 5.0, "timed seconds per model and thread count, after warm-up",
                    cohort::flags::Range{1e-3, 1e6});
COHORT_DEFINE_int(windows, 5, "timed windows per configuration; the median is reported",
                  cohort::flags::Range{1, 1000});
COHORT_DEFINE_string(device, "cpu", "where the steps run: cpu, gpu (GPU 0) or /gpu:N");
COHORT_DEFINE_bool(tf32, false, "GPU: let Dense and Conv2D use TF32 tensor cores");

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// GFLOP/s of a 1024^3 single-precision matrix product on one thread, through the product the
// ops use (OpenBLAS): the best of several repetitions, as the practical ceiling of one core.
double gemm_ceiling() {
  constexpr int kN = 1024;
  const cohort::Matrix a = cohort::Matrix::Random(kN, kN), b = cohort::Matrix::Random(kN, kN);
  cohort::Matrix c(kN, kN);
  const auto product = [&] {
    cohort::ops_detail::gemm(false, false, kN, kN, kN, a.data(), b.data(), 0.0f, c.data());
  };
  product();
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    constexpr int kProducts = 4;
    for (int i = 0; i < kProducts; ++i) product();
    best = std::max(best, kProducts * 2.0 * kN * kN * kN / seconds_since(start) / 1e9);
  }
  return best;
}

// CPU seconds used by this process so far, all threads together.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The 1-minute load average, to say how busy the machine was.
double load_average() {
  double load = -1.0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1.0;
    std::fclose(f);
  }
  return load;
}

struct Result {
  double images_per_second = 0.0;      // wall clock
  double images_per_cpu_second = 0.0;  // this process's CPU time, all threads
  double flops_per_image = 0.0;
  double products_alone = 0.0;         // images/s of a step made of its matrix products only
};

// Runs `step` for `window` seconds; returns how many times.
template <typename Step>
std::int64_t run_for(Step&& step, double window) {
  std::int64_t times = 0;
  const auto start = Clock::now();
  do step(), ++times;
  while (seconds_since(start) < window);
  return times;
}

// A step made of nothing but its matrix products: the calls one step made, replayed in order on
// one thread, through the same library choice. Every call reads and writes the same three
// buffers, which favours the cache over the step's own, so its speed bounds what a faster rest
// of the step could reach, given these products.
class ProductsAlone {
 public:
  explicit ProductsAlone(std::vector<cohort::ops_detail::GemmCall> calls)
      : calls_(std::move(calls)) {
    std::int64_t a_size = 1, b_size = 1, c_size = 1;
    for (const auto& call : calls_) {
      a_size = std::max(a_size, (call.transpose_a ? call.k : call.m) * call.lda);
      b_size = std::max(b_size, (call.transpose_b ? call.n : call.k) * call.ldb);
      c_size = std::max(c_size, call.m * call.ldc);
    }
    a_ = cohort::Tensor({a_size});
    b_ = cohort::Tensor({b_size});
    c_ = cohort::Tensor({c_size});
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (float& x : a_.span()) x = value(rng);
    for (float& x : b_.span()) x = value(rng);
  }

  void operator()() {
    for (const auto& call : calls_)
      cohort::ops_detail::gemm(call.transpose_a, call.transpose_b, call.m, call.n, call.k, 1.0f,
                               a_.data(), call.lda, b_.data(), call.ldb, call.beta, c_.data(),
                               call.ldc);
  }

 private:
  std::vector<cohort::ops_detail::GemmCall> calls_;
  cohort::Tensor a_, b_, c_;
};

Result time_model(const std::string& name, std::int64_t batch_size, int gpu) {
  cohort::Graph graph;
  cohort::Model model = cohort::build_model(name, graph);
  graph.initialize(1);
  model.set_gpu(gpu, FLAGS_tf32);
  cohort::OptimizerOptions options;
  options.name = "sgd";
  options.learning_rate.base = 0.01;
  auto optimizer = cohort::Optimizer::create(options);
  // The update as train's local mode makes it: in the products that compute the gradients
  // where the layers can (cohort::InPlaceUpdate), the optimizer's own pass for the rest. Plain
  // SGD without clipping always allows it.
  const auto in_place = cohort::InPlaceUpdate::create(*optimizer);
  if (!in_place) throw cohort::Error("bench_train: SGD made no in-place update");
  std::vector<float> grads(static_cast<std::size_t>(graph.num_parameters()));
  // As train's Trainer does for its GPU towers: the copies' host memory page-locked.
  std::shared_ptr<const void> pins[2];
  if (gpu >= 0) {
    pins[0] = cohort::Model::pin_for_gpu(graph.values());
    pins[1] = cohort::Model::pin_for_gpu(grads);
  }

  // A few distinct preloaded batches, so no step reads exactly the previous one's data.
  constexpr int kBatches = 8;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, model.num_classes() - 1);
  cohort::Shape shape = model.example_shape();
  shape.insert(shape.begin(), batch_size);
  std::vector<cohort::Tensor> images;
  std::vector<std::vector<std::int32_t>> labels(kBatches);
  for (int i = 0; i < kBatches; ++i) {
    images.emplace_back(shape);
    for (float& x : images.back().span()) x = pixel(rng);
    for (std::int64_t j = 0; j < batch_size; ++j) labels[i].push_back(label(rng));
  }

  std::int64_t step = 0;
  auto run_step = [&] {
    const int i = static_cast<int>(step % kBatches);
    cohort::OpContext context;
    context.seed = static_cast<std::uint64_t>(step);
    context.update_in_place = in_place.get();
    in_place->begin(step, grads.size());
    model.train_step(images[i], labels[i], grads, context);
    in_place->finish(graph.values(), grads);
    ++step;
  };

  const double window = FLAGS_seconds / static_cast<double>(FLAGS_windows);
  run_for(run_step, std::max(0.5, window));
  // On one thread the step's products run one after the other, as the replay runs them. Its
  // windows alternate with the step's, so that both meet the same machine.
  std::optional<ProductsAlone> products;
  if (gpu < 0 && cohort::intra_op_threads() == 1) {
    std::vector<cohort::ops_detail::GemmCall> calls;
    cohort::ops_detail::record_gemm_calls(&calls);
    run_step();
    cohort::ops_detail::record_gemm_calls(nullptr);
    products.emplace(std::move(calls));
    run_for(*products, std::min(0.2, window));
  }
  std::vector<double> rates, cpu_rates, product_rates;
  const auto images_in = [&](std::int64_t steps) {
    return static_cast<double>(steps * batch_size);
  };
  for (int w = 0; w < FLAGS_windows; ++w) {
    const auto start = Clock::now();
    const double cpu_start = cpu_seconds();
    const std::int64_t steps = run_for(run_step, window);
    rates.push_back(images_in(steps) / seconds_since(start));
    cpu_rates.push_back(images_in(steps) / (cpu_seconds() - cpu_start));
    if (!products) continue;
    const auto replay_start = Clock::now();
    const std::int64_t replays = run_for(*products, window);
    product_rates.push_back(images_in(replays) / seconds_since(replay_start));
  }
  return {median(rates), median(cpu_rates), model.flops_per_example(),
          products ? median(product_rates) : 0.0};
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  std::vector<int> thread_counts;
  for (std::int64_t t : cohort::flags::parse_size_list("threads", FLAGS_threads, 1024))
    thread_counts.push_back(static_cast<int>(t));
  const cohort::DeviceSpec device = cohort::parse_compute_device(FLAGS_device);
  const int gpu = device.device_type == "GPU"
                      ? cohort::assign_gpus(device, 1, 0, 1, cohort::visible_gpus()).front()
                      : -1;
  const std::vector<std::string> models = cohort::flags::split_list("models", FLAGS_models);
  for (const std::string& name : models) {
    cohort::Graph probe;
    cohort::build_model(name, probe);  // an unknown name fails before any timing
  }

  std::printf("# CPU kernels %s\n", cohort::kernel_level_summary().c_str());
  std::printf("# load average %.2f at start (other processes share the cores when it is above 0)\n",
              load_average());
  std::printf("%-11s %7s %5s %10s %12s %8s %8s %12s %14s\n", "model", "threads", "batch",
              "images/s", "MFLOP/image", "GFLOP/s", "of GEMM", "img/CPU-s", "products only");
  // On a GPU the host's GEMM ceiling does not apply. "of GEMM" is per thread: GFLOP/s over
  // threads times the one-core ceiling.
  const double ceiling = gpu < 0 ? gemm_ceiling() : 0.0;
  if (gpu < 0) std::printf("# GEMM ceiling, one core: %.1f GFLOP/s (1024^3 SGEMM)\n", ceiling);
  for (int threads : thread_counts) {
    cohort::set_intra_op_threads(threads);
    if (gpu >= 0)
      std::printf("# on GPU %d%s, %d host thread%s\n", gpu, FLAGS_tf32 ? " (TF32 allowed)" : "",
                  threads, threads == 1 ? "" : "s");
    for (const std::string& name : models) {
      const Result r = time_model(name, FLAGS_batch_size, gpu);
      const double gflops = r.images_per_second * r.flops_per_image / 1e9;
      char of_gemm[32] = "-";
      if (gpu < 0)
        std::snprintf(of_gemm, sizeof of_gemm, "%.0f%%", 100.0 * gflops / (threads * ceiling));
      char products[32] = "-";
      if (r.products_alone > 0.0)
        std::snprintf(products, sizeof products, "%.0f", r.products_alone);
      std::printf("%-11s %7d %5lld %10.0f %12.2f %8.1f %8s %12.0f %14s\n", name.c_str(), threads,
                  static_cast<long long>(FLAGS_batch_size), r.images_per_second,
                  r.flops_per_image / 1e6, gflops, of_gemm, r.images_per_cpu_second, products);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
