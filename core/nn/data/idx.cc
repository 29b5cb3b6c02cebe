// The IDX reader behind load_idx() and fashion_mnist().

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "cohort/core/base/flags.h"
#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/data/files.h"

namespace cohort::data {

COHORT_DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist",
                     "directory with the Fashion-MNIST (or MNIST) IDX files");

namespace {

constexpr std::uint32_t kLabelsMagic = 0x00000801;  // uint8 elements, 1 dimension
constexpr std::uint32_t kImagesMagic = 0x00000803;  // uint8 elements, 3 dimensions

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

// An IDX file, plain or gzip-compressed (detail::GzReader), header read and checked.
class IdxFile {
 public:
  IdxFile(const std::string& path, std::uint32_t magic, const char* what)
      : path_(path), file_(path, "an IDX file") {
    const int dims = static_cast<int>(magic & 0xff);
    header_bytes_ = 4 + 4 * dims;
    std::array<unsigned char, 4 + 4 * 3> header{};
    const std::int64_t got = read(header.data(), header_bytes_);
    if (got < 4) truncated(header_bytes_, got, "header");
    const std::uint32_t found = be32(header.data());
    if (found != magic)
      fail("found magic " + hex(found) + ", expected " + hex(magic) + " (IDX " + what +
           ": uint8, " + std::to_string(dims) + (dims == 1 ? " dimension)" : " dimensions)"));
    if (got < header_bytes_) truncated(header_bytes_, got, "header");
    for (int d = 0; d < dims; ++d) dims_.push_back(be32(header.data() + 4 + 4 * d));
  }

  const std::string& path() const { return path_; }
  std::int64_t dim(int i) const { return dims_.at(static_cast<std::size_t>(i)); }

  [[noreturn]] void fail(const std::string& fault) const { throw DataError(path_ + ": " + fault); }

  // Reads the `bytes` bytes that follow the header, which must be all the file holds. `layout`
  // says what the header announced, for the message.
  std::vector<std::uint8_t> read_payload(std::int64_t bytes, const std::string& layout) {
    std::vector<std::uint8_t> payload;
    // A corrupt count must not make us allocate terabytes before finding the file short, so the
    // buffer grows as data actually arrives.
    payload.resize(static_cast<std::size_t>(std::min<std::int64_t>(bytes, std::int64_t{1} << 28)));
    std::int64_t have = 0;
    for (;;) {
      have += read(payload.data() + have, static_cast<std::int64_t>(payload.size()) - have);
      if (have < static_cast<std::int64_t>(payload.size()) || have == bytes) break;
      payload.resize(static_cast<std::size_t>(std::min(bytes, 2 * have)));
    }
    if (have < bytes) truncated(header_bytes_ + bytes, header_bytes_ + have, layout);
    std::int64_t extra = 0;
    std::array<unsigned char, 1 << 16> scratch;
    for (std::int64_t n; (n = read(scratch.data(), scratch.size())) > 0;) extra += n;
    if (extra > 0)
      fail(std::to_string(extra) + " bytes after the expected end: expected " +
           std::to_string(header_bytes_ + bytes) + " bytes (" + layout + "), present " +
           std::to_string(header_bytes_ + bytes + extra) + decompressed());
    if (file_.stream_cut())
      fail("the gzip stream ends early, after all " + std::to_string(header_bytes_ + bytes) +
           " bytes (" + layout + "): its trailer, which checks them, is missing");
    return payload;
  }

 private:
  static std::uint32_t be32(const unsigned char* p) {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
  }

  const char* decompressed() const { return file_.decompressed(); }

  [[noreturn]] void truncated(std::int64_t expected, std::int64_t present,
                              const std::string& layout) const {
    fail("truncated: expected " + std::to_string(expected) + " bytes (" + layout + "), present " +
         std::to_string(present) + decompressed() +
         (file_.stream_cut() ? ", the gzip stream ends early" : ""));
  }

  std::int64_t read(void* buffer, std::int64_t n) { return file_.read(buffer, n); }

  std::string path_;
  detail::GzReader file_;
  std::int64_t header_bytes_ = 0;
  std::vector<std::int64_t> dims_;
};

std::string count_of(std::int64_t n, const char* what) { return std::to_string(n) + " " + what; }

// The first of dir/NAME.gz and dir/NAME that exists.
std::string find_file(const std::string& dir, const std::string& name) {
  const std::filesystem::path base = std::filesystem::path(dir) / name;
  std::error_code ec;
  for (const std::string& candidate : {base.string() + ".gz", base.string()})
    if (std::filesystem::exists(candidate, ec)) return candidate;
  throw DataError(dir + ": neither " + name + ".gz nor " + name +
                  " found (the directory comes from --data_dir)");
}

}  // namespace

Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                 const IdxOptions& options) {
  if (options.rows < 1 || options.cols < 1 || options.num_classes < 1 || options.num_classes > 256)
    throw InvalidArgument("load_idx: bad options: rows " + std::to_string(options.rows) +
                          ", cols " + std::to_string(options.cols) + ", num_classes " +
                          std::to_string(options.num_classes));
  const auto [index, every] = options.shard;
  if (every < 1 || index < 0 || index >= every)
    throw InvalidArgument("load_idx: shard " + std::to_string(index) + " of " +
                          std::to_string(every) + " (need 0 <= index < count)");
  auto storage = std::make_shared<Storage>();
  storage->num_classes = options.num_classes;
  storage->name = images_path;

  // Labels first: they are small, and their count lets the image file be checked before its
  // 47 MB are inflated.
  IdxFile labels(labels_path, kLabelsMagic, "labels");
  const std::int64_t n = labels.dim(0);
  const std::vector<std::uint8_t> label_bytes = labels.read_payload(n, count_of(n, "labels"));
  // The shard's examples: index, index + every, ...
  const std::int64_t kept = n > index ? (n - index + every - 1) / every : 0;
  storage->labels.reserve(static_cast<std::size_t>(kept));
  for (std::int64_t i = 0; i < n; ++i) {
    const int label = label_bytes[static_cast<std::size_t>(i)];
    if (label >= options.num_classes)
      labels.fail("label " + std::to_string(label) + " at index " + std::to_string(i) +
                  " is out of range [0, " + std::to_string(options.num_classes) + ")");
    if (i % every == index) storage->labels.push_back(label);
  }

  IdxFile images(images_path, kImagesMagic, "images");
  const std::int64_t count = images.dim(0), rows = images.dim(1), cols = images.dim(2);
  if (rows != options.rows || cols != options.cols)
    images.fail("images are " + std::to_string(rows) + "x" + std::to_string(cols) +
                ", expected " + std::to_string(options.rows) + "x" + std::to_string(options.cols));
  if (count != n)
    images.fail("holds " + count_of(count, "images") + " but " + labels_path + " holds " +
                count_of(n, "labels"));
  const std::vector<std::uint8_t> pixels = images.read_payload(
      count * rows * cols,
      count_of(count, "images of ") + std::to_string(rows) + "x" + std::to_string(cols));

  // A table gives exactly byte / 255.0f, the value TensorFlow's and PyTorch's loaders produce.
  std::array<float, 256> scale;
  for (int v = 0; v < 256; ++v) scale[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
  storage->features.resize({kept, rows, cols, 1});
  float* out = storage->features.data();
  const std::int64_t pixels_per_image = rows * cols;
  for (std::int64_t k = 0; k < kept; ++k) {
    const std::uint8_t* in = pixels.data() + (index + k * every) * pixels_per_image;
    for (std::int64_t p = 0; p < pixels_per_image; ++p) *out++ = scale[in[p]];
  }

  return Dataset(std::move(storage));
}

Dataset fashion_mnist(const std::string& dir, Split split, ShardSpec shard) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels = find_file(dir, prefix + "-labels-idx1-ubyte");
  return load_idx(images, labels, {.shard = shard});
}

Dataset fashion_mnist(Split split, ShardSpec shard) {
  return fashion_mnist(FLAGS_data_dir, split, shard);
}

}  // namespace cohort::data
