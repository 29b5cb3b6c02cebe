// load_image_folder(): a folder of PNG and JPEG images, a subfolder per class.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/class_folder.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/image_decode.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;

bool image_name(const fs::path& path) { return is_image_name(path.string()); }

constexpr detail::ClassFolderKind kImages{"images", "a .png, .jpg or .jpeg name",
                                          ".png, .jpg or .jpeg", "<class>/<image>.png or .jpg",
                                          image_name};

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

bool is_image_name(const std::string& path) {
  std::string extension = fs::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

Dataset load_image_folder(const std::string& dir, const ImageFolderOptions& options,
                          std::vector<std::string>* class_names) {
  detail::check_shard(options.shard, dir);
  detail::check_image_options(dir, options.height, options.width, options.channels);
  std::vector<std::string> classes;
  std::vector<detail::ClassFile> entries =
      detail::list_class_folder(dir, options.class_names, kImages, classes,
                                /*warn=*/options.shard.index == 0);
  if (options.validation_split != 0)
    entries = detail::class_folder_subset(
        std::move(entries), options.validation_split,
        options.subset == ImageFolderOptions::Subset::kValidation, options.seed, dir, "images");

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
