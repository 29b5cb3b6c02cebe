// load_image_folder(): a folder of PNG and JPEG images, a subfolder per class.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/image_decode.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string path;
  std::int32_t label = 0;
};

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

bool image_name(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 8) text += ", ...";
  return text;
}

// The subfolders of `dir` (following links), sorted, hidden ones left out.
std::vector<std::string> subfolders(const std::string& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) detail::fail(dir, "cannot read it: " + ec.message());
  if (!fs::exists(status)) detail::fail(dir, "no such folder");
  if (!fs::is_directory(status))
    detail::fail(dir, "not a folder (expected a folder with a subfolder of images per class)");
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!hidden(it->path()) && it->is_directory(ec)) names.push_back(it->path().filename().string());
  if (ec) detail::fail(dir, "cannot list it: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The classes in label order: the given names, or the subfolders found.
std::vector<std::string> class_list(const std::string& dir, const std::vector<std::string>& found,
                                    const std::vector<std::string>& given) {
  if (given.empty()) {
    if (found.empty())
      detail::fail(dir, "no class subfolders (expected " + dir + "/<class>/<image>.png or .jpg)");
    return found;
  }
  if (std::set<std::string>(given.begin(), given.end()).size() != given.size())
    throw InvalidArgument(dir + ": class_names repeats a name (" + join(given) + ")");
  for (const std::string& name : found)
    if (std::find(given.begin(), given.end(), name) == given.end())
      detail::fail(dir, "subfolder " + name + " is not one of the " +
                            std::to_string(given.size()) + " classes given (" + join(given) + ")");
  return given;
}

// Every image under the classes' subfolders, in the order of the classes, then of the paths;
// `skipped` counts the other files, and `skipped_example` names one. Links to folders are
// followed, each folder once per class (a link back up would otherwise loop).
std::vector<Entry> list_images(const std::string& dir, const std::vector<std::string>& classes,
                               std::int64_t& skipped, std::string& skipped_example) {
  std::vector<Entry> entries;
  for (std::size_t label = 0; label < classes.size(); ++label) {
    const fs::path folder = fs::path(dir) / classes[label];
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;  // a given class without a subfolder
    std::set<fs::path> visited{fs::canonical(folder, ec)};
    std::vector<std::string> paths;
    fs::path listing = folder;  // the folder being listed, for an error's message
    fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink, ec);
    for (const fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
      const fs::path& path = it->path();
      if (it->is_directory(ec)) {
        // Recursion into it happens at the next increment: an error there is this folder's.
        if (hidden(path) || !visited.insert(fs::canonical(path, ec)).second)
          it.disable_recursion_pending();
        listing = path;
        continue;
      }
      if (hidden(path) || !it->is_regular_file(ec)) continue;
      if (image_name(path)) {
        paths.push_back(path.string());
      } else if (skipped++ == 0) {
        skipped_example = path.string();
      }
    }
    if (ec) detail::fail(listing.string(), "cannot list it: " + ec.message());
    std::sort(paths.begin(), paths.end());
    for (std::string& path : paths)
      entries.push_back({std::move(path), static_cast<std::int32_t>(label)});
  }
  return entries;
}

// Bilinear resizing with half-pixel centres (TensorFlow's tf.image.resize, antialias off):
// output pixel i samples the input at (i + 0.5) * in / out - 0.5, clamped to the edge pixels.
struct Taps {
  std::vector<std::int64_t> low, high;
  std::vector<float> weight;  // of `high`
};

Taps taps(std::int64_t in, std::int64_t out) {
  Taps t;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    const double at = std::clamp((static_cast<double>(i) + 0.5) * scale - 0.5, 0.0,
                                 static_cast<double>(in - 1));
    const auto low = static_cast<std::int64_t>(std::floor(at));
    t.low.push_back(low);
    t.high.push_back(std::min(low + 1, in - 1));
    t.weight.push_back(static_cast<float>(at - static_cast<double>(low)));
  }
  return t;
}

// `image` as height x width values / 255 into `out`.
void write_example(const detail::Pixels& image, std::int64_t height, std::int64_t width,
                   float* out) {
  const int c = image.channels;
  const std::uint8_t* in = image.values.data();
  if (image.height == height && image.width == width) {
    // Exactly byte / 255.0f, as fashion_mnist() and TensorFlow's and PyTorch's loaders give.
    for (std::size_t i = 0; i < image.values.size(); ++i)
      out[i] = static_cast<float>(in[i]) / 255.0f;
    return;
  }
  const Taps rows = taps(image.height, height);
  const Taps cols = taps(image.width, width);
  const auto at = [&](std::int64_t y, std::int64_t x, int k) {
    return static_cast<float>(in[(y * image.width + x) * c + k]);
  };
  for (std::int64_t y = 0; y < height; ++y) {
    const float fy = rows.weight[y];
    for (std::int64_t x = 0; x < width; ++x) {
      const float fx = cols.weight[x];
      for (int k = 0; k < c; ++k) {
        const float top = at(rows.low[y], cols.low[x], k) +
                          fx * (at(rows.low[y], cols.high[x], k) - at(rows.low[y], cols.low[x], k));
        const float bottom =
            at(rows.high[y], cols.low[x], k) +
            fx * (at(rows.high[y], cols.high[x], k) - at(rows.high[y], cols.low[x], k));
        *out++ = (top + fy * (bottom - top)) / 255.0f;
      }
    }
  }
}

std::string size_text(std::int64_t height, std::int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

// InvalidArgument unless the size and channels asked for make sense.
void check_size_and_channels(const std::string& where, std::int64_t height, std::int64_t width,
                             int channels) {
  if (channels != 0 && channels != 1 && channels != 3)
    throw InvalidArgument(where + ": channels " + std::to_string(channels) +
                          " (1 for grey, 3 for RGB, 0 for the first image's)");
  if (height < 0 || width < 0 || (height == 0) != (width == 0))
    throw InvalidArgument(where + ": height " + std::to_string(height) + " and width " +
                          std::to_string(width) +
                          " (both positive to resize, both 0 to keep the images' size)");
}

// The images at `paths` as [n, height, width, channels], decoded on every OpenMP thread. Where
// height and width, or channels, are 0, `first`'s (the whole set's first image, which `paths`
// may not hold) decide. `where` names the set in the warning that colour images were read as
// grey because `first` is grey.
Tensor read_images(const std::vector<std::string>& paths, const std::string& first,
                   std::int64_t height, std::int64_t width, int channels, const std::string& where) {
  const bool resize = height > 0;
  const bool channels_given = channels != 0;
  if (!resize || !channels_given) {
    const detail::Pixels head =
        detail::image_header(detail::read_whole_file(first, "a PNG or JPEG image"), first);
    if (!resize) {
      height = head.height;
      width = head.width;
    }
    if (!channels_given) channels = head.channels;
  }
  const auto n = static_cast<std::int64_t>(paths.size());
  Tensor images({n, height, width, channels});
  std::vector<std::exception_ptr> errors(paths.size());
  std::vector<char> greyed(paths.size(), 0);  // colour read as grey
  const std::int64_t example_size = height * width * channels;
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string& path = paths[static_cast<std::size_t>(i)];
    try {
      const detail::Pixels image =
          detail::decode_image(detail::read_whole_file(path, "a PNG or JPEG image"), channels, path);
      if (!resize && (image.height != height || image.width != width))
        detail::fail(path, size_text(image.height, image.width) + " pixels where " + first +
                               " has " + size_text(height, width) +
                               " (give a height and width to resize every image to)");
      write_example(image, height, width, images.data() + i * example_size);
      greyed[static_cast<std::size_t>(i)] = image.file_channels > channels;
    } catch (...) {  // nothing may leave the parallel region (current_exception cannot throw)
      errors[static_cast<std::size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  if (const auto count = std::count(greyed.begin(), greyed.end(), 1); count > 0 && !channels_given)
    std::fprintf(stderr,
                 "[%s] warning: %s: %lld of %lld images are colour, read as grey because the first "
                 "(%s) is grey; give 3 channels to keep their colour\n",
                 process_label().c_str(), where.c_str(), static_cast<long long>(count),
                 static_cast<long long>(n), first.c_str());
  return images;
}

}  // namespace

Dataset load_image_folder(const std::string& dir, const ImageFolderOptions& options,
                          std::vector<std::string>* class_names) {
  detail::check_shard(options.shard, dir);
  check_size_and_channels(dir, options.height, options.width, options.channels);
  const std::vector<std::string> classes =
      class_list(dir, subfolders(dir), options.class_names);
  std::int64_t skipped = 0;
  std::string skipped_example;
  const std::vector<Entry> entries = list_images(dir, classes, skipped, skipped_example);
  if (skipped > 0)
    std::fprintf(stderr,
                 "[%s] warning: %s: passed over %lld files without a .png, .jpg or .jpeg name "
                 "(one is %s)\n",
                 process_label().c_str(), dir.c_str(), static_cast<long long>(skipped),
                 skipped_example.c_str());
  if (entries.empty())
    detail::fail(dir, "no .png, .jpg or .jpeg images in its " + std::to_string(classes.size()) +
                          " class subfolders (" + join(classes) + ")");

  // The shard's images; the first of the whole set decides what the options leave open.
  std::vector<std::string> paths;
  std::vector<std::int32_t> labels;
  for (std::size_t i = static_cast<std::size_t>(options.shard.index); i < entries.size();
       i += static_cast<std::size_t>(options.shard.count)) {
    paths.push_back(entries[i].path);
    labels.push_back(entries[i].label);
  }
  Tensor images = read_images(paths, entries.front().path, options.height, options.width,
                              options.channels, dir);
  if (class_names != nullptr) *class_names = classes;
  return Dataset::from_arrays(std::move(images), std::move(labels),
                              static_cast<int>(classes.size()), dir);
}

Tensor load_images(const std::vector<std::string>& paths, std::int64_t height, std::int64_t width,
                   int channels) {
  check_size_and_channels("load_images", height, width, channels);
  if (paths.empty()) throw InvalidArgument("load_images: no paths");
  return read_images(paths, paths.front(), height, width, channels,
                     paths.size() == 1 ? paths.front() : paths.front() + " and the others");
}

}  // namespace cohort::data
