#include "cohort/core/nn/data/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/data/class_folder.h"
#include "cohort/core/nn/data/files.h"
#include "cohort/core/nn/data/loaders.h"

namespace cohort::data {
namespace {

constexpr const char* kUnknown = "[UNK]";

bool space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// The length of the well-formed UTF-8 sequence at the start of `text` (Unicode's table 3-7: no
// overlong forms, surrogates or code points past U+10FFFF), else 1, so that a malformed byte
// (Latin-1 text's, a cut sequence) is a character of its own and never swallows the characters
// after it.
std::size_t code_point_length(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char c = byte(0);
  std::size_t n = 1;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) low = 0xa0;   // else overlong
    if (c == 0xed) high = 0x9f;  // else a surrogate
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) low = 0x90;   // else overlong
    if (c == 0xf4) high = 0x8f;  // else past U+10FFFF
  }
  if (n == 1 || n > text.size() || byte(1) < low || byte(1) > high) return 1;
  for (std::size_t i = 2; i < n; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 1;
  return n;
}

bool text_name(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".txt";
}

constexpr detail::ClassFolderKind kTextFiles{"text files", "a .txt name", ".txt",
                                             "<class>/<text>.txt", text_name};

// The examples of `texts` and their labels, from `where` (a folder, a file): the vectorizer
// adapted to them where it has no vocabulary, which they then are every one of (`whole`), and
// the shard's kept of those. One worker warns of examples without a word (padding alone): `what`
// names one ("text file"), and `source(i)` where text i came from ("" for none).
Dataset text_examples(std::vector<std::string> texts, std::vector<std::int32_t> labels, bool whole,
                      ShardSpec shard, TextVectorizer& vectorizer, int num_classes,
                      const std::string& where, const std::function<std::string(std::size_t)>& source,
                      const char* what) {
  std::size_t blank = 0;
  std::string blank_example;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (texts[i].find_first_not_of(" \t\n\v\f\r") == std::string::npos && blank++ == 0)
      blank_example = source(i);
  // One worker says so, of the whole set (with a vocabulary given, each reads its shard alone).
  if (blank > 0 && shard.index == 0 && whole)
    std::fprintf(stderr, "[%s] warning: %s: %zu %s%s without a word%s: examples of padding alone\n",
                 process_label().c_str(), where.c_str(), blank, what, blank == 1 ? "" : "s",
                 blank_example.empty() ? "" : (" (one is " + blank_example + ")").c_str());
  if (whole) {
    if (!vectorizer.adapted()) vectorizer.adapt(texts);
    std::vector<std::string> mine;
    std::vector<std::int32_t> mine_labels;
    for (auto i = static_cast<std::size_t>(shard.index); i < texts.size();
         i += static_cast<std::size_t>(shard.count)) {
      mine.push_back(std::move(texts[i]));
      mine_labels.push_back(labels[i]);
    }
    texts = std::move(mine);
    labels = std::move(mine_labels);
  }
  return Dataset::from_arrays(vectorizer.vectorize(texts), std::move(labels), num_classes, where);
}

}  // namespace

TextVectorizer::TextVectorizer(TextOptions options) : options_(options) {
  // Ids are held as floats, exact up to 2^24.
  if (options_.max_tokens < 3 || options_.max_tokens > (1 << 24) || options_.sequence_length < 1)
    throw InvalidArgument("TextVectorizer: max_tokens " + std::to_string(options_.max_tokens) +
                          ", sequence_length " + std::to_string(options_.sequence_length) +
                          ": max_tokens must be >= 3 (padding, unknown and a token) and at most "
                          "2^24, sequence_length >= 1");
}

std::vector<std::string> TextVectorizer::tokens(std::string_view text) const {
  // A UTF-8 byte order mark (which Windows editors write) is no part of the first word.
  if (text.starts_with("\xef\xbb\xbf")) text.remove_prefix(3);
  std::string standard;
  standard.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (options_.strip_punctuation && c < 0x80 && std::ispunct(c)) continue;
    standard.push_back(options_.lowercase && c < 0x80 ? static_cast<char>(std::tolower(c)) : ch);
  }
  std::vector<std::string> out;
  if (options_.split == TextOptions::Split::kCharacters) {
    for (std::size_t i = 0; i < standard.size();) {
      const std::size_t n = code_point_length(std::string_view(standard).substr(i));
      out.push_back(standard.substr(i, n));
      i += n;
    }
    return out;
  }
  for (std::size_t i = 0; i < standard.size();) {
    while (i < standard.size() && space(static_cast<unsigned char>(standard[i]))) ++i;
    std::size_t end = i;
    while (end < standard.size() && !space(static_cast<unsigned char>(standard[end]))) ++end;
    if (end > i) out.push_back(standard.substr(i, end - i));
    i = end;
  }
  return out;
}

void TextVectorizer::adapt(std::span<const std::string> texts) {
  std::map<std::string, std::int64_t> counts;
  for (const std::string& text : texts)
    for (std::string& token : tokens(text)) ++counts[std::move(token)];
  std::vector<std::pair<std::string, std::int64_t>> ranked(counts.begin(), counts.end());
  // Decreasing count; the map's byte order among equal counts (a stable sort keeps it).
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> vocabulary = {"", kUnknown};
  for (auto& [token, count] : ranked) {
    if (static_cast<std::int64_t>(vocabulary.size()) >= options_.max_tokens) break;
    if (token != kUnknown) vocabulary.push_back(std::move(token));
  }
  set_vocabulary(std::move(vocabulary));
}

void TextVectorizer::set_vocabulary(std::vector<std::string> vocabulary) {
  if (vocabulary.size() < 2 || !vocabulary[0].empty() || vocabulary[1] != kUnknown)
    throw InvalidArgument(
        "TextVectorizer: a vocabulary starts with \"\" (padding) and \"[UNK]\", not " +
        (vocabulary.empty() ? std::string("nothing")
                            : "\"" + vocabulary[0] + "\"" +
                                  (vocabulary.size() > 1 ? " and \"" + vocabulary[1] + "\"" : "")));
  if (static_cast<std::int64_t>(vocabulary.size()) > options_.max_tokens)
    throw InvalidArgument("TextVectorizer: a vocabulary of " + std::to_string(vocabulary.size()) +
                          " tokens is more than max_tokens " + std::to_string(options_.max_tokens));
  std::unordered_map<std::string, std::int32_t> ids;
  for (std::size_t i = 2; i < vocabulary.size(); ++i)
    if (!ids.emplace(vocabulary[i], static_cast<std::int32_t>(i)).second)
      throw InvalidArgument("TextVectorizer: the vocabulary repeats \"" + vocabulary[i] + "\"");
  vocabulary_ = std::move(vocabulary);
  ids_ = std::move(ids);
}

Tensor TextVectorizer::vectorize(std::span<const std::string> texts) const {
  if (!adapted())
    throw InvalidArgument("TextVectorizer: no vocabulary yet (adapt() or set_vocabulary() first)");
  const std::int64_t length = options_.sequence_length;
  Tensor ids({static_cast<std::int64_t>(texts.size()), length});  // zeros: the padding
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::vector<std::string> words = tokens(texts[i]);
    const std::int64_t n = std::min<std::int64_t>(length, static_cast<std::int64_t>(words.size()));
    float* row = ids.data() + static_cast<std::int64_t>(i) * length +
                 (options_.pad_front ? length - n : 0);
    for (std::int64_t t = 0; t < n; ++t) {
      const auto found = ids_.find(words[static_cast<std::size_t>(t)]);
      row[t] = static_cast<float>(found == ids_.end() ? 1 : found->second);
    }
  }
  return ids;
}

namespace {

// A token as one line of a vocabulary file: a backslash, a line feed and a carriage return
// (characters are tokens too) written as \\, \n and \r.
std::string escaped(const std::string& token) {
  std::string out;
  for (const char c : token) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescaped(const std::string& line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\' || i + 1 == line.size()) {
      out += line[i];
      continue;
    }
    const char next = line[++i];
    out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
  }
  return out;
}

}  // namespace

void TextVectorizer::save_vocabulary(const std::string& path) const {
  if (!adapted())
    throw InvalidArgument("TextVectorizer: no vocabulary to save to " + path);
  std::ofstream out(path);
  for (const std::string& token : vocabulary_) out << escaped(token) << '\n';
  out.flush();
  if (!out) detail::fail(path, "cannot write the vocabulary");
}

void TextVectorizer::load_vocabulary(const std::string& path) {
  std::istringstream lines(detail::read_whole_file(path, "a vocabulary file"));
  std::vector<std::string> vocabulary;
  for (std::string line; std::getline(lines, line);) {
    // A file of Windows line ends (save_vocabulary writes a token's own \r as "\r").
    if (line.ends_with('\r')) line.pop_back();
    vocabulary.push_back(unescaped(line));
  }
  try {
    set_vocabulary(std::move(vocabulary));
  } catch (const InvalidArgument& e) {
    detail::fail(path, e.what());
  }
}

Dataset load_text_folder(const std::string& dir, TextVectorizer& vectorizer,
                         const TextFolderOptions& options, std::vector<std::string>* class_names) {
  detail::check_shard(options.shard, dir);
  std::vector<std::string> classes;
  std::vector<detail::ClassFile> files =
      detail::list_class_folder(dir, options.class_names, kTextFiles, classes,
                                /*warn=*/options.shard.index == 0);
  if (options.validation_split != 0)
    files = detail::class_folder_subset(
        std::move(files), options.validation_split,
        options.subset == TextFolderOptions::Subset::kValidation, options.seed, dir, "text files");
  // The whole set's texts when they make the vocabulary, else the shard's alone.
  const bool whole = !vectorizer.adapted();
  const std::size_t step = whole ? 1 : static_cast<std::size_t>(options.shard.count);
  const std::size_t first = whole ? 0 : static_cast<std::size_t>(options.shard.index);
  std::vector<std::string> texts;
  std::vector<std::int32_t> labels;
  for (std::size_t i = first; i < files.size(); i += step) {
    texts.push_back(detail::read_whole_file(files[i].path, "a text file"));
    labels.push_back(files[i].label);
    const std::string& text = texts.back();
    if (text.starts_with("\xff\xfe") || text.starts_with("\xfe\xff"))
      detail::fail(files[i].path, "UTF-16 text (its byte-order mark says so): save it as UTF-8");
    if (text.find('\0') != std::string::npos)
      detail::fail(files[i].path, "a NUL byte: not a text file (a binary file named .txt?)");
  }
  if (class_names != nullptr) *class_names = classes;
  return text_examples(std::move(texts), std::move(labels), whole, options.shard, vectorizer,
                       static_cast<int>(classes.size()), dir,
                       [&](std::size_t i) { return files[first + i * step].path; }, "text file");
}

namespace {

// How the CSV reader reads a file of texts: the text column as its one feature column.
CsvOptions text_csv(const TextCsvOptions& options) {
  CsvOptions csv;
  csv.delimiter = options.delimiter;
  csv.header = options.header;
  csv.quotes = options.quotes;
  csv.label_column = options.label_column;
  csv.feature_columns = {options.text_column};
  csv.num_classes = options.num_classes;
  csv.class_names = options.class_names;
  return csv;
}

}  // namespace

std::vector<std::string> load_csv_texts(const std::string& path, const TextCsvOptions& options) {
  CsvOptions csv = text_csv(options);
  csv.label_column.clear();
  csv.num_classes = 0;
  csv.class_names.clear();
  std::vector<std::string> texts, classes;
  std::vector<std::int32_t> labels;
  detail::read_csv_texts(path, csv, texts, labels, classes, /*warn=*/false);
  return texts;
}

Dataset load_text_csv(const std::string& path, TextVectorizer& vectorizer,
                      const TextCsvOptions& options, std::vector<std::string>* class_names) {
  detail::check_shard(options.shard, path);
  const CsvOptions csv = text_csv(options);
  std::vector<std::string> texts, classes;
  std::vector<std::int32_t> labels;
  const int num_classes =
      detail::read_csv_texts(path, csv, texts, labels, classes, /*warn=*/options.shard.index == 0);
  if (options.validation_split != 0) {
    std::vector<std::string> subset_texts;
    std::vector<std::int32_t> subset_labels;
    for (const std::size_t i : detail::validation_subset(
             texts.size(), options.validation_split,
             options.subset == TextFolderOptions::Subset::kValidation, options.seed, path, "rows")) {
      subset_texts.push_back(std::move(texts[i]));
      subset_labels.push_back(labels[i]);
    }
    texts = std::move(subset_texts);
    labels = std::move(subset_labels);
  }
  if (class_names != nullptr) *class_names = classes;
  return text_examples(std::move(texts), std::move(labels), /*whole=*/true, options.shard, vectorizer,
                       num_classes, path, [](std::size_t) { return std::string(); }, "row");
}

Tensor load_word_vectors(const std::string& path, const std::vector<std::string>& vocabulary,
                         std::int64_t dim, std::int64_t* found) {
  if (dim < 1) throw InvalidArgument(path + ": word vectors of dimension " + std::to_string(dim));
  detail::file_size(path, "a text file of word vectors");
  std::ifstream in(path);
  if (!in) detail::fail(path, "cannot be read");
  std::unordered_map<std::string, std::int64_t> ids;
  for (std::size_t i = 2; i < vocabulary.size(); ++i)  // not the padding or [UNK]
    ids.emplace(vocabulary[i], static_cast<std::int64_t>(i));
  Tensor table({static_cast<std::int64_t>(vocabulary.size()), dim});
  table.set_zero();
  std::int64_t count = 0, vectors = 0;
  std::vector<float> values;
  std::string line, word;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    const auto at_line = [&] { return "line " + std::to_string(number) + ": "; };
    if (line.find('\0') != std::string::npos)
      detail::fail(path, at_line() + "a NUL byte: not a text file of word vectors (GloVe's or "
                                     "word2vec's text format; word2vec's binary one is not read)");
    std::istringstream fields(line);
    if (!(fields >> word)) continue;  // a blank line
    values.clear();
    for (float v; fields >> v;) values.push_back(v);
    if (!fields.eof())
      detail::fail(path, at_line() + "a value of '" + word +
                             "' is not a number (or is out of float's range)");
    // word2vec's text format starts with a line of the count and the dimension.
    const auto digits = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    if (number == 1 && values.size() == 1 && values[0] == std::floor(values[0]) &&
        std::all_of(word.begin(), word.end(), digits)) {
      if (values[0] != static_cast<float>(dim))
        detail::fail(path, "line 1: word2vec's header gives vectors of dimension " +
                               std::to_string(static_cast<std::int64_t>(values[0])) + ", not " +
                               std::to_string(dim) + " (the embedding's dimension)");
      continue;
    }
    ++vectors;
    if (static_cast<std::int64_t>(values.size()) != dim)
      detail::fail(path, at_line() + "the vector of '" + word + "' has " +
                             std::to_string(values.size()) + " values, not " + std::to_string(dim) +
                             " (the embedding's dimension)");
    const auto at = ids.find(word);
    if (at == ids.end()) continue;
    std::copy(values.begin(), values.end(), table.data() + at->second * dim);
    ids.erase(at);  // the first vector of a word counts
    ++count;
  }
  if (vectors == 0) detail::fail(path, "no word vectors in it");
  if (found != nullptr) *found = count;
  return table;
}

}  // namespace cohort::data
