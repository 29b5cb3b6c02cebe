#pragma once
// Folders with a subfolder per class (internal to core/nn/data): what the image and text folder
// readers share. Every fault is a DataError (or InvalidArgument, for bad options) naming the
// folder or file.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cohort::data::detail {

/// One example's file and its class's index.
struct ClassFile {
  std::string path;
  std::int32_t label = 0;
};

/// What a kind of folder holds, for the walk and its messages.
struct ClassFolderKind {
  const char* files;      ///< "images", "text files"
  const char* names;      ///< the accepted names, "a .png, .jpg or .jpeg name"
  const char* extensions; ///< the same for "no ... in its class subfolders": ".png, .jpg or .jpeg"
  const char* example;    ///< a file's place: "<class>/<image>.png or .jpg"
  bool (*accepts)(const std::filesystem::path& path);  ///< by its name
};

/// Up to 8 of `names`, comma-separated, then "...".
std::string join_names(const std::vector<std::string>& names);

/// The classes of `dir` (its subfolders, sorted, or `given` in that order, every subfolder one of
/// them) and every file of `kind` under their subfolders, at any depth, in the order of the
/// classes, then of the paths. Links to folders are followed, each folder once per class; hidden
/// files and folders are passed over, and other files with one warning on stderr counting them
/// (where `warn`: every worker lists the same folder, one of them says so).
std::vector<ClassFile> list_class_folder(const std::string& dir,
                                         const std::vector<std::string>& given,
                                         const ClassFolderKind& kind,
                                         std::vector<std::string>& classes, bool warn = true);

/// Keras's validation_split over n examples, chosen by `seed`: the indices of the validation
/// subset (or, with `validation` false, the training one), in order. `where` and `what` ("text
/// files", "rows") name them in the messages of a split outside (0, 1) or a subset left empty.
std::vector<std::size_t> validation_subset(std::size_t n, double split, bool validation,
                                           std::uint64_t seed, const std::string& where,
                                           const char* what);

/// validation_subset() of the files.
std::vector<ClassFile> class_folder_subset(std::vector<ClassFile> files, double split,
                                           bool validation, std::uint64_t seed,
                                           const std::string& dir, const char* what);

}  // namespace cohort::data::detail
