// load_image_folder(): a folder of PNG and JPEG images, a subfolder per class.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/image_decode.h"
#include "cohort/core/nn/data/loaders.h"
#include "cohort/core/nn/data/random.h"

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

// The training or validation subset of `entries` (ImageFolderOptions::validation_split), in
// their order.
std::vector<Entry> subset(std::vector<Entry> entries, const ImageFolderOptions& options,
                          const std::string& dir) {
  const double split = options.validation_split;
  if (!(split > 0 && split < 1))
    throw InvalidArgument(dir + ": validation_split " + std::to_string(split) +
                          " (a fraction in (0, 1), or 0 for every image)");
  const std::size_t n = entries.size();
  const auto validation = static_cast<std::size_t>(split * static_cast<double>(n));
  if (validation == 0 || validation == n)
    detail::fail(dir, "validation_split " + std::to_string(split) + " of " + std::to_string(n) +
                          " images leaves the " + (validation == 0 ? "validation" : "training") +
                          " subset empty");
  const std::vector<char> held = detail::held_out(n, validation, options.seed);
  const char keep = options.subset == ImageFolderOptions::Subset::kTraining ? 0 : 1;
  std::vector<Entry> out;
  for (std::size_t i = 0; i < n; ++i)
    if (held[i] == keep) out.push_back(std::move(entries[i]));
  return out;
}

constexpr const char* kImageFile = "a PNG or JPEG image";

// The image files at `paths` as [n, height, width, channels]; `first` (the whole set's first
// image, which `paths` may not hold) decides what the options leave open.
Tensor read_images(const std::vector<std::string>& paths, const std::string& first,
                   std::int64_t height, std::int64_t width, int channels, const std::string& where) {
  const bool open = height == 0 || channels == 0;  // the first image decides something
  const detail::ImageLayout layout = detail::image_layout(
      height, width, channels, open ? detail::read_whole_file(first, kImageFile) : "", first);
  return detail::decode_images(
      static_cast<std::int64_t>(paths.size()),
      [&](std::int64_t i) {
        return detail::read_whole_file(paths[static_cast<std::size_t>(i)], kImageFile);
      },
      [&](std::int64_t i) { return paths[static_cast<std::size_t>(i)]; }, layout, where);
}

}  // namespace

Dataset load_image_folder(const std::string& dir, const ImageFolderOptions& options,
                          std::vector<std::string>* class_names) {
  detail::check_shard(options.shard, dir);
  detail::check_image_options(dir, options.height, options.width, options.channels);
  const std::vector<std::string> classes =
      class_list(dir, subfolders(dir), options.class_names);
  std::int64_t skipped = 0;
  std::string skipped_example;
  std::vector<Entry> entries = list_images(dir, classes, skipped, skipped_example);
  if (skipped > 0)
    std::fprintf(stderr,
                 "[%s] warning: %s: passed over %lld files without a .png, .jpg or .jpeg name "
                 "(one is %s)\n",
                 process_label().c_str(), dir.c_str(), static_cast<long long>(skipped),
                 skipped_example.c_str());
  if (entries.empty())
    detail::fail(dir, "no .png, .jpg or .jpeg images in its " + std::to_string(classes.size()) +
                          " class subfolders (" + join(classes) + ")");
  if (options.validation_split != 0) entries = subset(std::move(entries), options, dir);

  // The shard's images; the first of the whole set decides what the options leave open.
  std::vector<std::string> paths;
  std::vector<std::int32_t> labels;
  for (std::size_t i = static_cast<std::size_t>(options.shard.index); i < entries.size();
       i += static_cast<std::size_t>(options.shard.count)) {
    paths.push_back(entries[i].path);
    labels.push_back(entries[i].label);
  }
  if (class_names != nullptr) *class_names = classes;
  if (!options.in_memory) {
    const std::string& first = entries.front().path;
    const detail::ImageLayout layout = detail::image_layout(
        options.height, options.width, options.channels,
        detail::read_whole_file(first, kImageFile), first);
    auto storage = std::make_shared<Storage>();
    storage->source_shape = {static_cast<std::int64_t>(paths.size()), layout.height,
                             layout.width, layout.channels};
    storage->source = detail::image_files(std::move(paths), layout, dir);
    storage->labels = std::move(labels);
    storage->num_classes = static_cast<int>(classes.size());
    storage->name = dir;
    return Dataset(std::move(storage));
  }
  Tensor images = read_images(paths, entries.front().path, options.height, options.width,
                              options.channels, dir);
  return Dataset::from_arrays(std::move(images), std::move(labels),
                              static_cast<int>(classes.size()), dir);
}

Tensor load_images(const std::vector<std::string>& paths, std::int64_t height, std::int64_t width,
                   int channels) {
  detail::check_image_options("load_images", height, width, channels);
  if (paths.empty()) throw InvalidArgument("load_images: no paths");
  return read_images(paths, paths.front(), height, width, channels,
                     paths.size() == 1 ? paths.front() : paths.front() + " and the others");
}

}  // namespace cohort::data
