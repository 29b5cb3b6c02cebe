#pragma once
// Text: a vocabulary that turns text into token ids (TextVectorizer, after Keras's
// TextVectorization), and folders of text files with a subfolder per class (load_text_folder,
// after Keras's text_dataset_from_directory).
//
//   cohort::data::TextVectorizer words({.max_tokens = 20000, .sequence_length = 200});
//   auto train = cohort::data::load_text_folder("reviews/train", words);  // adapts `words`
//   auto test = cohort::data::load_text_folder("reviews/test", words);    // the same ids
//   model.add(cohort::embedding("embed", words.vocabulary_size(), 64)) ...

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cohort/core/nn/data/dataset.h"
#include "cohort/core/nn/tensor.h"

namespace cohort::data {

/// How text becomes tokens, and tokens ids.
struct TextOptions {
  /// kWords: tokens are the runs of characters between white space, after the standardisation
  /// below (Keras's default); kCharacters: every character (a UTF-8 code point) is a token, and
  /// each byte that starts no well-formed one (Latin-1 text, say) is a token of its own.
  enum class Split { kWords, kCharacters } split = Split::kWords;
  bool lowercase = true;          ///< ASCII letters to lower case
  /// ASCII punctuation removed (with lowercase: Keras's lower_and_strip_punctuation).
  bool strip_punctuation = true;
  /// The vocabulary's size, the padding id 0 and the out-of-vocabulary id 1 included: the
  /// max_tokens - 2 most frequent tokens of the text adapted to get ids 2, 3, ... (at most 2^24:
  /// ids are held as floats).
  std::int64_t max_tokens = 20000;
  /// Ids per example: a longer text is cut (its first ids kept), a shorter one padded with 0.
  std::int64_t sequence_length = 200;
  /// The padding before a shorter text's ids, not after (Keras pads after): a recurrent layer
  /// without a padding mask (ops/masking.h) that reads its last step then reads text.
  bool pad_front = false;
};

/// A vocabulary, and the ids of texts under it. Id 0 is padding and 1 stands for a token outside
/// the vocabulary ("[UNK]"), as in Keras's TextVectorization; adapt() gives the others by
/// decreasing count in the text it reads (ties in byte order).
class TextVectorizer {
 public:
  /// InvalidArgument for max_tokens below 3 or a sequence_length below 1.
  explicit TextVectorizer(TextOptions options = {});

  /// The tokens of `text`, as options() split them.
  std::vector<std::string> tokens(std::string_view text) const;
  /// Builds the vocabulary from `texts` (replacing any before).
  void adapt(std::span<const std::string> texts);
  bool adapted() const { return !vocabulary_.empty(); }
  /// Sets the vocabulary, id by id: "" and "[UNK]" first, as vocabulary() gives it (a saved
  /// vocabulary read back). InvalidArgument when those two are not first, a token repeats, or it
  /// is longer than max_tokens.
  void set_vocabulary(std::vector<std::string> vocabulary);
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }
  /// The ids an Embedding over them needs: the vocabulary's size.
  std::int64_t vocabulary_size() const { return static_cast<std::int64_t>(vocabulary_.size()); }
  /// [texts, sequence_length] ids (as floats, as the data pipeline holds them), padded as
  /// options() say. InvalidArgument before a vocabulary is set.
  Tensor vectorize(std::span<const std::string> texts) const;
  const TextOptions& options() const { return options_; }

  /// The vocabulary as a text file, one token a line, in id order (ids 0 and 1 as empty and
  /// "[UNK]" lines; a backslash, line feed and carriage return in a token as \\, \n and \r);
  /// load_vocabulary() reads such a file into set_vocabulary(). DataError naming the file when
  /// it cannot be written or read; InvalidArgument to save without a vocabulary.
  void save_vocabulary(const std::string& path) const;
  void load_vocabulary(const std::string& path);

 private:
  TextOptions options_;
  std::vector<std::string> vocabulary_;
  std::unordered_map<std::string, std::int32_t> ids_;
};

/// Pre-trained word vectors for an Embedding over `vocabulary` (TextVectorizer::vocabulary()):
/// [vocabulary size, dim], row i the vector of token i in the text file `path` (GloVe's format,
/// a word and its `dim` values a line, or word2vec's, the same after a line of the count and
/// the dimension: a first line of two whole numbers, so a 1-dimensional GloVe file must not start
/// with a number), zeros for the padding, [UNK] and the tokens the file lacks (Keras's recipe).
/// `found`, if given, receives how many tokens had a vector. DataError naming the file and line
/// for a vector of another length or a value that is not a number.
Tensor load_word_vectors(const std::string& path, const std::vector<std::string>& vocabulary,
                         std::int64_t dim, std::int64_t* found = nullptr);

/// How to read a folder of text files (load_text_folder).
struct TextFolderOptions {
  /// As ImageFolderOptions: the classes in label order (empty: the subfolders, sorted), a
  /// worker's shard, and Keras's validation_split with its subset and seed.
  std::vector<std::string> class_names{};
  ShardSpec shard{};
  double validation_split = 0;
  enum class Subset { kTraining, kValidation } subset = Subset::kTraining;
  std::uint64_t seed = 0;
};

/// Reads a folder with a subfolder per class of .txt files, as Keras's
/// text_dataset_from_directory takes them (dir/pos/0001.txt, dir/neg/0002.txt, ...; at any
/// depth, links followed; other files passed over with a warning): each file is an example,
/// labelled by its class's index, its ids [sequence_length] from `vectorizer`. A vectorizer
/// without a vocabulary adapts to the texts read (the training or validation subset, every
/// shard's), so every worker that reads the same folder gets the same vocabulary; give the
/// test folder the same vectorizer. Only the shard's examples are kept. A missing folder, one
/// without class subfolders or .txt files, an unreadable file: a DataError naming it.
Dataset load_text_folder(const std::string& dir, TextVectorizer& vectorizer,
                         const TextFolderOptions& options = {},
                         std::vector<std::string>* class_names = nullptr);

/// How to read a CSV or TSV file of texts (load_text_csv).
struct TextCsvOptions {
  /// The column of the texts and that of their classes, by name (or, without a header, by
  /// 0-based index as text: "0").
  std::string text_column = "text";
  std::string label_column = "label";
  /// As CsvOptions': the delimiter ('\t' for a TSV file), a header row, and quoted fields (false:
  /// a quote is a character like any other, as in GLUE's TSV files).
  char delimiter = ',';
  bool header = true;
  bool quotes = true;
  /// A label column of class indices: the number of classes (0: the largest label + 1); or, for
  /// one of names, the classes in label order (empty: the names found, sorted, as load_csv
  /// numbers them). A test file takes the training file's.
  int num_classes = 0;
  std::vector<std::string> class_names{};
  /// As TextFolderOptions: a worker's shard, and Keras's validation_split with its subset and
  /// seed, over the rows.
  ShardSpec shard{};
  double validation_split = 0;
  TextFolderOptions::Subset subset = TextFolderOptions::Subset::kTraining;
  std::uint64_t seed = 0;
};

/// Reads a CSV file of texts, a row each with its class, as pandas writes them (a quoted text may
/// hold the delimiter, doubled quotes and line breaks; a TSV file too, or either gzip-compressed):
/// each row is an example labelled by its class, its ids [sequence_length] from `vectorizer`.
/// Other columns are not read. The vectorizer adapts as load_text_folder's does, to the subset
/// read (every shard's), so every worker that reads the same file gets the same vocabulary; only
/// the shard's examples are kept, though every row is read and checked. `class_names` receives
/// the classes' names (empty for a label column of indices): give them to the test file's read.
/// Faults are load_csv's, a DataError naming the file and the line.
Dataset load_text_csv(const std::string& path, TextVectorizer& vectorizer,
                      const TextCsvOptions& options = {},
                      std::vector<std::string>* class_names = nullptr);

/// The texts of a CSV or TSV file's text column, every row's in order (new texts to classify, a
/// corpus), read as load_text_csv reads them; the label column and the class, shard and split
/// options play no part. Faults are load_csv's.
std::vector<std::string> load_csv_texts(const std::string& path, const TextCsvOptions& options = {});

}  // namespace cohort::data
