#include "cohort/core/nn/data/class_folder.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <system_error>
#include <utility>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/random.h"

namespace cohort::data::detail {
namespace {

namespace fs = std::filesystem;

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

// The subfolders of `dir` (following links), sorted, hidden ones left out.
std::vector<std::string> subfolders(const std::string& dir, const ClassFolderKind& kind) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    fail(dir, "cannot read it: " + ec.message());
  if (!fs::exists(status)) fail(dir, "no such folder");
  if (!fs::is_directory(status))
    fail(dir, std::string("not a folder (expected a folder with a subfolder of ") + kind.files +
                  " per class)");
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!hidden(it->path()) && it->is_directory(ec))
      names.push_back(it->path().filename().string());
  if (ec) fail(dir, "cannot list it: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The classes in label order: the given names, or the subfolders found.
std::vector<std::string> class_list(const std::string& dir, const std::vector<std::string>& found,
                                    const std::vector<std::string>& given,
                                    const ClassFolderKind& kind) {
  if (given.empty()) {
    if (found.empty())
      fail(dir, "no class subfolders (expected " + dir + "/" + kind.example + ")");
    return found;
  }
  if (std::set<std::string>(given.begin(), given.end()).size() != given.size())
    throw InvalidArgument(dir + ": class_names repeats a name (" + join_names(given) + ")");
  for (const std::string& name : found)
    if (std::find(given.begin(), given.end(), name) == given.end())
      fail(dir, "subfolder " + name + " is not one of the " + std::to_string(given.size()) +
                    " classes given (" + join_names(given) + ")");
  return given;
}

}  // namespace

std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 8) text += ", ...";
  return text;
}

std::vector<ClassFile> list_class_folder(const std::string& dir,
                                         const std::vector<std::string>& given,
                                         const ClassFolderKind& kind,
                                         std::vector<std::string>& classes, bool warn) {
  classes = class_list(dir, subfolders(dir, kind), given, kind);
  std::int64_t skipped = 0;
  std::string skipped_example;
  std::vector<ClassFile> files;
  std::vector<std::string> empty;  // classes of the folder's own subfolders without a file
  for (std::size_t label = 0; label < classes.size(); ++label) {
    const fs::path folder = fs::path(dir) / classes[label];
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;  // a given class without a subfolder
    std::set<fs::path> visited{fs::canonical(folder, ec)};
    std::vector<std::string> paths;
    fs::path listing = folder;  // the folder being listed, for an error's message
    fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink,
                                        ec);
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
      if (kind.accepts(path)) {
        paths.push_back(path.string());
      } else if (skipped++ == 0) {
        skipped_example = path.string();
      }
    }
    if (ec) fail(listing.string(), "cannot list it: " + ec.message());
    std::sort(paths.begin(), paths.end());
    if (paths.empty() && given.empty()) empty.push_back(classes[label]);
    for (std::string& path : paths)
      files.push_back({std::move(path), static_cast<std::int32_t>(label)});
  }
  if (warn && skipped > 0)
    std::fprintf(stderr, "[%s] warning: %s: passed over %lld files without %s (one is %s)\n",
                 process_label().c_str(), dir.c_str(), static_cast<long long>(skipped), kind.names,
                 skipped_example.c_str());
  // Keras counts them as classes too; the model gets outputs no training example ever asks for.
  if (warn && !empty.empty() && !files.empty())
    std::fprintf(stderr, "[%s] warning: %s: %zu class subfolder%s without %s (%s): classes no example trains\n",
                 process_label().c_str(), dir.c_str(), empty.size(), empty.size() == 1 ? "" : "s", kind.files,
                 join_names(empty).c_str());
  if (files.empty())
    fail(dir, std::string("no ") + kind.extensions + " " + kind.files + " in its " +
                  std::to_string(classes.size()) + " class subfolders (" + join_names(classes) +
                  ")");
  return files;
}

std::vector<std::size_t> validation_subset(std::size_t n, double split, bool validation,
                                           std::uint64_t seed, const std::string& where,
                                           const char* what) {
  if (!(split > 0 && split < 1))
    throw InvalidArgument(where + ": validation_split " + std::to_string(split) +
                          " (a fraction in (0, 1), or 0 for all the " + what + ")");
  const auto held_count = static_cast<std::size_t>(split * static_cast<double>(n));
  if (held_count == 0 || held_count == n)
    fail(where, "validation_split " + std::to_string(split) + " of " + std::to_string(n) + " " +
                    what + " leaves the " + (held_count == 0 ? "validation" : "training") +
                    " subset empty");
  const std::vector<char> held = held_out(n, held_count, seed);
  const char keep = validation ? 1 : 0;
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < n; ++i)
    if (held[i] == keep) out.push_back(i);
  return out;
}

std::vector<ClassFile> class_folder_subset(std::vector<ClassFile> files, double split,
                                           bool validation, std::uint64_t seed,
                                           const std::string& dir, const char* what) {
  std::vector<ClassFile> out;
  for (const std::size_t i : validation_subset(files.size(), split, validation, seed, dir, what))
    out.push_back(std::move(files[i]));
  return out;
}

}  // namespace cohort::data::detail
