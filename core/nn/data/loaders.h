#pragma once
// Data from common files: NumPy .npy and .npz (NumPy's own format; .npz through libzip), HDF5
// (through the HDF5 library), CSV, folders of PNG and JPEG images (through libpng and libjpeg),
// a subfolder per class, and TensorFlow's TFRecord files of tf.train.Example records. Folders of
// text files: text.h.
//
//   auto train = cohort::data::dataset_from_npy("x_train.npy", "y_train.npy");
//   auto table = cohort::data::load_csv("houses.csv", {.target_columns = {"price"}});
//   auto photos = cohort::data::load_image_folder("flowers/train", {.height = 64, .width = 64});
//   auto records = cohort::data::load_tfrecord({"train-*.tfrecord"},
//                                              {.features = "image/encoded", .label = "image/class/label"});
//
// Every fault of a file (missing, not the format, truncated, an unsupported dtype or layout, a
// non-numeric CSV field, counts that do not agree) is a DataError naming the file and the fault
// in one line.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data {

/// An array read from a NumPy file, converted to float32, in C (row-major) order, with its shape.
struct NpyArray {
  Tensor values;
  std::string dtype;      ///< as the file gave it, e.g. "<f4", "<i8", "|u1"
  bool integral = false;  ///< an integer or bool dtype
};

/// Reads a .npy file (format versions 1, 2 and 3): bool, int8-64, uint8-64, float16, float32 and
/// float64 arrays of either byte order, C order, converted to float32. A 0-d array is read as shape [1]. With a
/// `shard`, only its rows (entries of the first dimension) are read and kept: index,
/// index + count, ... (InvalidArgument unless 0 <= index < count).
NpyArray load_npy(const std::string& path, ShardSpec shard = {});
/// Reads every array of a .npz archive (stored or deflated, as numpy.savez and savez_compressed
/// write them), by name without the ".npy" suffix.
std::map<std::string, NpyArray> load_npz(const std::string& path);
/// Writes `values` as a little-endian float32 .npy file (C order).
void save_npy(const std::string& path, const Tensor& values);
/// Writes class labels as a little-endian int32 .npy file of shape [n] (what dataset_from_npy
/// reads back as labels).
void save_npy(const std::string& path, std::span<const std::int32_t> labels);
/// Writes `image` ([height, width], or [height, width, channels] of 1 or 3: grey or RGB, the
/// layout the image readers give) as an 8-bit PNG file, for a person to look at (a generator's
/// samples, a model's denoised images): each value mapped from [low, high] to 0-255, rounded,
/// values outside clipped. The image readers read it back as the value's byte / 255. Throws
/// InvalidArgument naming `path` for another shape, a value that is not finite (naming where),
/// or a range that is not low < high; Error where the file cannot be written.
void save_png(const std::string& path, const Tensor& image, float low = 0.0f, float high = 1.0f);

/// A dataset of the features in one array and the labels or targets in another. An integral
/// array of n values ([n] or [n, 1]) gives class labels (num_classes 0: the largest label + 1);
/// anything else float targets [n, ...]. The first dimensions must agree.
///
/// The NumPy loaders below (and load_csv, through CsvOptions::shard) take a `shard` (a worker's
/// share, what Dataset::shard(index, count) keeps): only its examples are converted and kept, so
/// once loaded eight workers on a node hold the features once between them, not eight times
/// (while loading, an .npz member is inflated whole in each, and a .npy or CSV file is read
/// through a window of about a megabyte). Every label is still read and
/// checked, and num_classes 0 counts them all, so that every shard agrees.
Dataset dataset_from_arrays(NpyArray features, NpyArray targets, const std::string& name,
                            int num_classes = 0);
/// The same from two .npy files.
Dataset dataset_from_npy(const std::string& features_path, const std::string& targets_path,
                         int num_classes = 0, ShardSpec shard = {});
/// The same from two arrays of one .npz archive.
Dataset dataset_from_npz(const std::string& path, const std::string& features_key = "x",
                         const std::string& targets_key = "y", int num_classes = 0,
                         ShardSpec shard = {});

/// Images [n, channels, height, width] (PyTorch's layout) as Cohort's [n, height, width,
/// channels]. InvalidArgument naming `what` unless `images` has four dimensions.
Tensor channels_last(const Tensor& images, const std::string& what);
/// The same for a dataset's images (held as floats): its labels or targets as they are.
Dataset channels_last(const Dataset& data, const std::string& what);

/// Throws InvalidArgument naming `what` where images of `example` shape look like PyTorch's
/// layout, [channels, height, width]: three dimensions, the first 1, 3 or 4 and the other two
/// above 4 (a [3, 32, 32] image). Read as Cohort reads images, [height, width, channels], they
/// would train on nonsense without a word; the message ends in `remedy`, what the user is to do
/// ("give --channels_first to turn them", where the program calls channels_last() for that).
void check_not_channels_first(const Shape& example, const std::string& what, const std::string& remedy);

/// Reads one dataset of an HDF5 file (`key`, a path in the file), converted to float32 as
/// dataset_from_hdf5 converts it (and with a `shard`, only its rows): new examples to predict.
NpyArray load_hdf5(const std::string& path, const std::string& key, ShardSpec shard = {});
/// The same a batch of rows at a time: `take` gets rows [b, b + batch_size) of the dataset in
/// turn (the last batch fewer; a scalar or an empty dataset: one call), and the dataset's shape
/// in the file, read as they are taken, so a dataset of any size is never held whole. What
/// `take` throws ends the read. Errors as load_hdf5's.
void for_each_hdf5_batch(const std::string& path, const std::string& key, std::int64_t batch_size,
                         const std::function<void(const NpyArray& rows, const Shape& shape)>& take);

/// The same from two datasets of an HDF5 file (h5py's, an HPC code's output):
/// `features_key` and `targets_key` are paths in the file ("x", "train/images"); any integer or
/// float type, stored contiguous, chunked or compressed, converted as it is read; an integer
/// dataset of n values gives class labels. With a `shard`, only its rows of the features are
/// converted and kept (compressed chunks are inflated whole).
Dataset dataset_from_hdf5(const std::string& path, const std::string& features_key = "x",
                          const std::string& targets_key = "y", int num_classes = 0,
                          ShardSpec shard = {});

/// How to read a CSV file of numbers. (The `{}` initializers keep GCC's -Wextra quiet about
/// designated initializers that leave members out, as in the example above.)
struct CsvOptions {
  char delimiter = ',';
  /// The first row names the columns (columns are then named by it; else by 0-based index).
  bool header = true;
  /// Fields may be quoted (below); false: a quote is a character like any other, as in TSV
  /// files whose texts hold quotes unpaired (GLUE's, read by pandas with quoting=QUOTE_NONE).
  bool quotes = true;
  /// A column of class labels (the column's name, or its index as text), or empty: class indices
  /// (0, 1, ...), or class names ("setosa", "virginica") where the first row's is not a number,
  /// numbered in sorted order (as Keras's StringLookup and scikit-learn's LabelEncoder do).
  std::string label_column{};
  /// Columns of float targets (names or indices), or empty (then label_column is required).
  std::vector<std::string> target_columns{};
  /// The feature columns; empty: every column that is not the label, a target or ignored.
  std::vector<std::string> feature_columns{};
  /// Without feature_columns: columns left out of the features (an id, a date, a text column),
  /// which are then not read.
  std::vector<std::string> ignore_columns{};
  /// The target columns may be features too (a series forecast from its own past, read as
  /// windows whose target is of a later row than any of theirs): feature_columns may name them,
  /// and where no other column is left to be a feature, the targets are the features. Else a
  /// target among the features would be learned from itself, and is refused.
  bool targets_as_features = false;
  /// With label_column: the number of classes; 0: the largest label + 1 (or the names found).
  int num_classes = 0;
  /// With label_column: the class names, as load_csv gave them for another file of the same
  /// table (the training file's): every label is then one of them, by name, and takes its index.
  std::vector<std::string> class_names{};
  /// A worker's share of the rows (what Dataset::shard keeps): only they are kept, though every
  /// row is read and checked, and num_classes 0 counts every label, so that every shard agrees.
  ShardSpec shard{};
};

/// Reads a CSV file of numeric fields into a dataset of [n, features] examples with class labels
/// or [n, targets] float targets. The file may be gzip-compressed (as pandas writes .csv.gz), told
/// by its magic bytes; it is read a megabyte at a time. Blank lines are skipped; every row must have as many fields
/// as the first. Fields may be quoted as RFC 4180 (and pandas) write them: a quoted field may
/// hold the delimiter and line breaks, and "" in it stands for one quote; spaces around a field,
/// and inside its quotes, are dropped; a quote left open to the end of the file or text after a
/// closing quote, in any column, is a DataError naming the line. Columns that are not used are not parsed as numbers, so they may
/// hold text. Every value must be a finite number (`nan`, a missing value's usual mark, is
/// refused). Unknown columns, neither a label nor target columns, or both feature_columns and
/// ignore_columns: InvalidArgument. A column
/// is named by the header or by its 0-based index; a name that is another column's index is
/// refused as ambiguous. A header of numbers only is warned of on stderr (it may be a first row
/// of data, lost), unless it is the indices themselves, "0,1,2", as pandas writes for unnamed
/// columns.
///
/// `feature_columns`, if given, receives the feature columns used, in order, by name (by index
/// without a header): given as CsvOptions::feature_columns for another file of the same table
/// (a test set), its columns are matched by name, in whatever order that file has them.
/// `class_names`, if given, receives the classes of a label column of names, sorted (empty for
/// class indices): given as CsvOptions::class_names for another file, its labels take the same
/// indices. A name in another file that is not among them is a DataError naming the line.
Dataset load_csv(const std::string& path, const CsvOptions& options,
                 std::vector<std::string>* feature_columns = nullptr,
                 std::vector<std::string>* class_names = nullptr);
/// `text` as a field of a CSV file (RFC 4180): as it is, or quoted where it holds a comma, a quote
/// or a line end, its quotes doubled. For files a program writes (predictions, metrics).
std::string csv_field(std::string_view text);
/// `fields` as a line of a CSV file (csv_field()s between commas, no line end).
std::string csv_row(const std::vector<std::string>& fields);

/// The same file's feature columns alone, [n, features], for new rows to predict: `options`'
/// feature_columns name them (load_csv's, from the training file: matched by name, in any order
/// here), with neither a label_column nor target_columns; other columns (a label, an id) are
/// not read.
Tensor load_csv_features(const std::string& path, const CsvOptions& options);
/// The same a batch of rows at a time: `take` gets the feature columns of rows [b, b +
/// batch_size) in turn ([k, features], the last batch fewer), as they are read, so that a file
/// of any size is never held whole (a batch_size below 1: InvalidArgument). Every row is checked
/// as load_csv_features checks it, a fault found after some batches were taken; what `take`
/// throws ends the read.
void for_each_csv_features_batch(const std::string& path, const CsvOptions& options, std::int64_t batch_size,
                                 const std::function<void(const Tensor&)>& take);

/// How to read a folder of images (load_image_folder).
struct ImageFolderOptions {
  /// The size every example gets, in pixels. Both 0: the first image's, which every image must
  /// then have. Both given: each image is resized to it, bilinearly with half-pixel centres (as
  /// TensorFlow's tf.image.resize and Keras's image_dataset_from_directory; no antialiasing).
  std::int64_t height = 0;
  std::int64_t width = 0;
  /// 1 (grey) or 3 (RGB); 0: the first image's (1 if it is grey, 3 otherwise; colour images then
  /// read as grey are warned of). Colour is made grey as PIL's convert("L") makes it (ITU-R
  /// BT.601 weights), grey repeated into RGB, and alpha dropped.
  int channels = 0;
  /// The classes in label order; empty: the names of the folder's subfolders, sorted. Given (a
  /// test set read with its training set's classes), every subfolder must be one of them; a class
  /// may have no subfolder.
  std::vector<std::string> class_names{};
  /// A worker's share of the images (what Dataset::shard keeps): only they are decoded and kept.
  ShardSpec shard{};
  /// Keras's validation_split and subset, for a folder without a test set of its own: with a
  /// split in (0, 1), the images (of every class) are shuffled by `seed`, the last
  /// floor(split * n) form the validation subset and the others the training subset, and
  /// `subset` says which this call reads (another call with the same split and seed reads the
  /// rest); each subset keeps the folder's order. 0: every image.
  double validation_split = 0;
  enum class Subset { kTraining, kValidation } subset = Subset::kTraining;
  std::uint64_t seed = 0;
  /// false: only the files' paths are kept, and each image is decoded when a batch takes it
  /// (again each epoch, on every intra-op thread; Dataset::in_memory() says so), for sets larger
  /// than memory; a file that does not decode is then found when it is first used.
  bool in_memory = true;
};

/// Reads a folder of images with a subfolder per class, as Keras's image_dataset_from_directory
/// and torchvision's ImageFolder take them:
///
///   dir/cat/0001.png   dir/cat/more/0002.jpg   dir/dog/0003.jpeg   ...
///
/// Every PNG (8 or 16 bits, grey, RGB or palette, with or without alpha, interlaced) and baseline
/// or progressive JPEG in a class's subfolder, at any depth, is an example of that class: images
/// [n, height, width, channels] (NHWC) of pixel values / 255 in [0, 1], as fashion_mnist() gives,
/// labelled by the class's index. The examples are in the order of their classes, then of their
/// paths (shuffling is the BatchIterator's); every worker must see the same files for the shards
/// to fit together. Links to folders are followed, each folder once per class. Files and folders
/// whose names start with a dot are passed over; any other file without a .png, .jpg or .jpeg
/// name (in any case) is passed over with one warning on stderr that counts them. Which format a
/// file holds is told by its first bytes, not its name. JPEG warnings that leave the pixels right
/// (bytes between segments) pass silently, as in PIL. `class_names`, if given, receives the
/// classes in label order.
///
/// A missing or unreadable folder, one without class subfolders or without images, a file that is
/// not an image or does not decode (truncated, a bad checksum or Huffman code, a CMYK JPEG), an
/// image of another size than the first
/// without options.height and width, a subfolder that is not among options.class_names: a
/// DataError naming the file or folder. Images are decoded by every core OpenMP gives the process.
Dataset load_image_folder(const std::string& dir, const ImageFolderOptions& options = {},
                          std::vector<std::string>* class_names = nullptr);

/// Whether `path` is named as the images load_image_folder() takes: .png, .jpg or .jpeg, in
/// any case (the name alone; the content decides the format when read).
bool is_image_name(const std::string& path);

/// The PNG and JPEG images at `paths`, decoded as load_image_folder() decodes them, into
/// [n, height, width, channels] (the first image's size and channels where 0), in the order
/// given: what a model trained on a folder predicts from (Model::predict). Throws DataError
/// naming the file as load_image_folder() does; InvalidArgument for no paths or bad options.
Tensor load_images(const std::vector<std::string>& paths, std::int64_t height = 0,
                   std::int64_t width = 0, int channels = 0);

/// What load_tfrecord takes from each tf.train.Example.
struct TFRecordOptions {
  /// The feature holding an example's inputs: numbers, a float_list or int64_list (either, in
  /// any record) of as many values in every record, as floats; or a bytes_list of one value:
  /// with `shape`, raw uint8 values (value / 255, as TensorFlow's MNIST tutorial writes
  /// "image_raw"), else an encoded PNG or JPEG image (decoded as load_image_folder decodes
  /// files, with height, width and channels below).
  std::string features{};
  /// The example shape the values are given (its size must be the count of values), e.g.
  /// {28, 28, 1}; empty: [count] for numbers. Given for bytes, they are raw values.
  Shape shape{};
  /// An int64_list feature of one class label per record; or empty, and then `target`: a
  /// float_list (or int64_list) feature of as many float targets in every record.
  std::string label{};
  std::string target{};
  /// With a label: the number of classes; 0: the largest label + 1 (over every record).
  int num_classes = 0;
  /// Encoded images: as ImageFolderOptions (both 0: the first image's size; 0: its channels).
  std::int64_t height = 0;
  std::int64_t width = 0;
  int channels = 0;
  /// A worker's share of the records (what Dataset::shard keeps): every record is read and its
  /// label checked, only these are converted (and their images decoded) and kept.
  ShardSpec shard{};
  /// Encoded images: false keeps the encoded bytes (a tenth of the floats' size or less) and
  /// decodes each image when a batch takes it (see ImageFolderOptions::in_memory).
  bool in_memory = true;
};

/// Reads TFRecord files of tf.train.Example records (as tf.io.TFRecordWriter writes them, plain,
/// GZIP- or ZLIB-compressed: a file is plain when its first length's checksum holds, else told by
/// its first bytes) into a
/// dataset, the records in the order of the files, then of the file. `files` may hold glob
/// patterns ("data/train-*.tfrecord"), each replaced by the files it matches, sorted. Both
/// checksums of every record are verified. Features other than those named are skipped. A
/// missing or unmatched file, a truncated or corrupt record (a compressed stream cut short among
/// them), a record that is not an Example, a feature missing from a record (the message lists
/// those it has) or held as bytes where the first record holds numbers (or the reverse), a NaN
/// or infinite value, a label that is not one int64 in [0, 2^31 - 1), a count that differs from
/// the first record's: a DataError naming the file and the record. Bad options: InvalidArgument.
Dataset load_tfrecord(const std::vector<std::string>& files, const TFRecordOptions& options);
/// The features alone of TFRecord files, [n, example...]: new examples to predict, read and
/// checked as load_tfrecord reads them (options' label and target empty; images decoded, at
/// options' height, width and channels). The records in the order of the files, then of the file.
Tensor load_tfrecord_features(const std::vector<std::string>& files, TFRecordOptions options);
/// The same a batch at a time, as the records are read: `take` gets the features of each
/// `batch_size` records in turn, [batch_size, example...] (the last batch fewer; at least one
/// call, [0, example...] where a shard keeps no record), so files of any size are never held
/// whole (a large set of images to predict). What `take` throws ends the read. Errors as
/// load_tfrecord_features's, a bad record's only after the batches before it.
void for_each_tfrecord_batch(const std::vector<std::string>& files, TFRecordOptions options,
                             std::int64_t batch_size, const std::function<void(const Tensor&)>& take);

}  // namespace cohort::data
