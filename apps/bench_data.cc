// bench_data: how fast the data readers deliver examples, on Fashion-MNIST written as the files a
// user brings (docs/BENCHMARKS.md):
//
//   build/bin/bench_data --images=20000
//
// Writes the first --images training images as PNG files in a folder per class, and as a CSV file
// (label and 784 pixel values per row, as Kaggle's copy of Fashion-MNIST has them) plain and
// gzip-compressed, under --dir; then times, median of --repeats: the folder decoded into memory
// with one intra-op thread and with every core; one epoch of 64-image batches decoded as they are
// made (ImageFolderOptions::in_memory = false), against the same epoch from memory; and the CSV
// files read. One table row per measurement: seconds and examples per second.
#include <png.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <zlib.h>

#include "cohort/core/base/flags.h"
#include "cohort/core/nn/data/batch_iterator.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/threads.h"
#include "cohort/core/train/app.h"

COHORT_DEFINE_int(images, 20000, "training images to write and read", cohort::flags::Range{64, 60000});
COHORT_DEFINE_string(dir, "/tmp/cohort_bench_data", "where the files are written (replaced)");
COHORT_DEFINE_int(repeats, 3, "runs of each measurement (the median is printed)",
                  cohort::flags::Range{1, 100});

namespace {

namespace fs = std::filesystem;

void write_png(const std::string& path, std::span<const float> pixels) {
  std::vector<std::uint8_t> bytes;
  for (const float v : pixels) bytes.push_back(static_cast<std::uint8_t>(v * 255.0f + 0.5f));
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = 28;
  image.height = 28;
  image.format = PNG_FORMAT_GRAY;
  if (png_image_write_to_file(&image, path.c_str(), 0, bytes.data(), 0, nullptr) == 0)
    throw cohort::Error("cannot write " + path + ": " + image.message);
}

// The median over --repeats runs of `run`, in seconds.
double median_seconds(const std::function<void()>& run) {
  std::vector<double> seconds;
  for (int r = 0; r < FLAGS_repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

void row(const std::string& what, double seconds, std::int64_t examples) {
  std::printf("%-62s %9.3f %12.0f\n", what.c_str(), seconds, static_cast<double>(examples) / seconds);
}

// One epoch of 64-example batches, in order.
void epoch(const cohort::data::Dataset& data) {
  auto batches = cohort::data::BatchIterator::in_order(data, 64);
  cohort::data::Batch batch;
  while (batches.next(batch)) {
  }
}

int Main(int argc, char** argv) {
  cohort::app::refuse_arguments(argc, argv);
  const cohort::data::Dataset all = cohort::data::fashion_mnist(cohort::data::Split::kTrain);
  const std::int64_t n = std::min<std::int64_t>(FLAGS_images, all.size());
  const fs::path dir = FLAGS_dir;
  fs::remove_all(dir);
  for (int c = 0; c < 10; ++c) fs::create_directories(dir / "images" / ("class" + std::to_string(c)));
  std::string csv = "label";
  for (int p = 0; p < 784; ++p) csv += ",pixel" + std::to_string(p);
  csv += "\n";
  for (std::int64_t i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%05lld.png", static_cast<long long>(i));
    write_png((dir / "images" / ("class" + std::to_string(all.label(i))) / name).string(), all.example(i));
    csv += std::to_string(all.label(i));
    for (const float v : all.example(i)) csv += "," + std::to_string(static_cast<int>(v * 255.0f + 0.5f));
    csv += "\n";
  }
  std::ofstream((dir / "train.csv").string(), std::ios::binary) << csv;
  gzFile gz = gzopen((dir / "train.csv.gz").string().c_str(), "wb");
  gzwrite(gz, csv.data(), static_cast<unsigned>(csv.size()));
  gzclose(gz);
  const std::string folder = (dir / "images").string();

  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%lld images of 28x28, %d cores, median of %lld runs\n", static_cast<long long>(n),
              cores, static_cast<long long>(FLAGS_repeats));
  std::printf("%-62s %9s %12s\n", "what", "seconds", "examples/s");
  for (const int threads : {1, cores}) {
    cohort::set_intra_op_threads(threads);
    const std::string t = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    row("image folder (PNG), decoded into memory, " + t,
        median_seconds([&] { cohort::data::load_image_folder(folder); }), n);
    cohort::data::ImageFolderOptions on_use;
    on_use.in_memory = false;
    const cohort::data::Dataset lazy = cohort::data::load_image_folder(folder, on_use);
    row("epoch of batches decoded as made (in_memory = false), " + t,
        median_seconds([&] { epoch(lazy); }), n);
    if (threads == 1) {
      const cohort::data::Dataset memory = cohort::data::load_image_folder(folder);
      row("epoch of batches from memory", median_seconds([&] { epoch(memory); }), n);
    }
  }
  cohort::data::CsvOptions label{.label_column = "label"};
  row("CSV, 785 columns, " + std::to_string(csv.size() >> 20) + " MB",
      median_seconds([&] { cohort::data::load_csv((dir / "train.csv").string(), label); }), n);
  row("the same CSV gzip-compressed",
      median_seconds([&] { cohort::data::load_csv((dir / "train.csv.gz").string(), label); }), n);
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cohort::app::Run(Main, argc, argv); }
