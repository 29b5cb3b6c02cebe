// Tests of core/nn/data/text.h: TextVectorizer's tokens, vocabulary and ids (Keras's
// TextVectorization by its documented rules), load_text_folder's classes, shards and splits, and
// load_word_vectors' two file formats.
#include "cohort/core/nn/data/text.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cohort/core/base/error.h"
#include "loader_checks.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

using cohort::Tensor;
using cohort::data::Dataset;
using cohort::data::TextFolderOptions;
using cohort::data::TextOptions;
using cohort::data::TextVectorizer;
using cohort::test::data_error;
using cohort::test::invalid_argument;
using cohort::test::spit;

namespace {

std::vector<float> ids(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

// dir/<class>/<n>.txt for each text, and a file that is not text beside them.
void write_folder(const cohort::test::TempDir& dir,
                  const std::vector<std::pair<std::string, std::string>>& texts) {
  int n = 0;
  for (const auto& [label, text] : texts) {
    std::filesystem::create_directories(dir.path / label);
    spit(dir / (label + "/" + std::to_string(n++) + ".txt"), text);
  }
}

}  // namespace

TEST_CASE("TextVectorizer splits words as Keras does: lower case, no punctuation, white space") {
  TextVectorizer words;
  CHECK(words.tokens("The cat's hat,\tTHE  cat!\n") ==
        std::vector<std::string>{"the", "cats", "hat", "the", "cat"});
  CHECK(words.tokens("  ").empty());
  // A UTF-8 byte order mark (Notepad's) is no part of the first word.
  CHECK(words.tokens("\xef\xbb\xbfHello there") == std::vector<std::string>{"hello", "there"});
  CHECK(words.tokens("Café déjà-vu") == std::vector<std::string>{"café", "déjàvu"});  // ASCII only
  TextVectorizer characters({.split = TextOptions::Split::kCharacters});
  CHECK(characters.tokens("Ab é!") == std::vector<std::string>{"a", "b", " ", "é"});
  CHECK(characters.tokens("\xef\xbb\xbf" "Ab") == std::vector<std::string>{"a", "b"});
  // Bytes that start no well-formed character (Latin-1's, a cut sequence) are tokens alone.
  CHECK(characters.tokens("caf\xe9 b") == std::vector<std::string>{"c", "a", "f", "\xe9", " ", "b"});
  CHECK(characters.tokens("\xf0\x9f\x98\x80\xe2\x82") ==
        std::vector<std::string>{"\xf0\x9f\x98\x80", "\xe2", "\x82"});
  // Nor do an overlong form, a surrogate or a lead past U+10FFFF start one.
  CHECK(characters.tokens("\xc0\xaf\xed\xa0\x80\xf5\x80") ==
        std::vector<std::string>{"\xc0", "\xaf", "\xed", "\xa0", "\x80", "\xf5", "\x80"});
  TextVectorizer raw({.lowercase = false, .strip_punctuation = false});
  CHECK(raw.tokens("Hi, you") == std::vector<std::string>{"Hi,", "you"});
}

TEST_CASE("TextVectorizer: a vocabulary by count, ids 0 and 1 for padding and unknown tokens") {
  TextVectorizer words({.max_tokens = 5, .sequence_length = 4});
  const std::vector<std::string> texts = {"b a c", "a b", "a d e"};
  words.adapt(texts);
  // a: 3, b: 2, then c, d, e once each: the first in byte order fills the last place.
  CHECK(words.vocabulary() == std::vector<std::string>{"", "[UNK]", "a", "b", "c"});
  CHECK(words.vocabulary_size() == 5);
  const std::vector<std::string> more = {"a b c d e", "c", ""};
  // Cut to 4 ids, padded with 0 after; d and e are unknown (1).
  CHECK(ids(words.vectorize(more)) ==
        std::vector<float>{2, 3, 4, 1, 4, 0, 0, 0, 0, 0, 0, 0});
  cohort::test::TempDir dir("text");
  words.save_vocabulary(dir / "vocabulary.txt");
  TextVectorizer again({.max_tokens = 5, .sequence_length = 4});
  again.load_vocabulary(dir / "vocabulary.txt");
  CHECK(again.vocabulary() == words.vocabulary());
  CHECK(ids(again.vectorize(more)) == ids(words.vectorize(more)));
  // Padded before the ids instead of after.
  TextVectorizer front({.max_tokens = 5, .sequence_length = 4, .pad_front = true});
  front.set_vocabulary(words.vocabulary());
  CHECK(ids(front.vectorize(more)) == std::vector<float>{2, 3, 4, 1, 0, 0, 0, 4, 0, 0, 0, 0});
}

TEST_CASE("TextVectorizer refuses what it cannot use, naming it") {
  CHECK(invalid_argument([] { TextVectorizer({.max_tokens = 2}); }).starts_with(
      "TextVectorizer: max_tokens 2, sequence_length 200: max_tokens must be >= 3"));
  TextVectorizer words;
  const std::vector<std::string> texts = {"a"};
  CHECK(invalid_argument([&] { words.vectorize(texts); }) ==
        "TextVectorizer: no vocabulary yet (adapt() or set_vocabulary() first)");
  CHECK(invalid_argument([&] { words.set_vocabulary({"a", "b"}); }) ==
        "TextVectorizer: a vocabulary starts with \"\" (padding) and \"[UNK]\", not \"a\" and \"b\"");
  CHECK(invalid_argument([&] { words.set_vocabulary({"", "[UNK]", "x", "x"}); }) ==
        "TextVectorizer: the vocabulary repeats \"x\"");
  cohort::test::TempDir dir("text");
  spit(dir / "bad.txt", "the\nand\n");
  CHECK(data_error([&] { words.load_vocabulary(dir / "bad.txt"); }) ==
        dir / "bad.txt" +
            ": TextVectorizer: a vocabulary starts with \"\" (padding) and \"[UNK]\", not \"the\" and \"and\"");
}

TEST_CASE("load_text_folder: a class per subfolder, one vocabulary for every shard") {
  cohort::test::TempDir dir("text_folder");
  write_folder(dir, {{"neg", "bad awful film"}, {"neg", "awful plot"}, {"pos", "good film"},
                     {"pos", "good good plot"}, {"pos", "fine"}});
  spit(dir / "pos/notes.md", "not a text file");  // passed over, with a warning
  TextVectorizer whole({.sequence_length = 3});
  std::vector<std::string> classes;
  const Dataset all = cohort::data::load_text_folder(dir.str(), whole, {}, &classes);
  CHECK(classes == std::vector<std::string>{"neg", "pos"});
  CHECK(all.size() == 5);
  CHECK(all.num_classes() == 2);
  CHECK(all.example_shape() == cohort::Shape{3});
  // good: 3, then awful, film and plot twice (byte order), bad and fine once.
  CHECK(whole.vocabulary() ==
        std::vector<std::string>{"", "[UNK]", "good", "awful", "film", "plot", "bad", "fine"});
  // Each shard's worker adapts to the whole folder, and keeps its examples alone.
  for (int index = 0; index < 2; ++index) {
    TextVectorizer mine({.sequence_length = 3});
    const Dataset shard =
        cohort::data::load_text_folder(dir.str(), mine, {.shard = {index, 2}});
    CHECK(mine.vocabulary() == whole.vocabulary());
    CHECK(shard.size() == (index == 0 ? 3 : 2));
  }
  // A given vocabulary is kept: the test folder's texts are read under the training set's ids.
  TextVectorizer fixed({.sequence_length = 3});
  fixed.set_vocabulary({"", "[UNK]", "plot"});
  cohort::data::load_text_folder(dir.str(), fixed);
  CHECK(fixed.vocabulary_size() == 3);
  // Keras's validation_split: the two subsets part the files.
  TextVectorizer a, b;
  const Dataset training = cohort::data::load_text_folder(
      dir.str(), a, {.validation_split = 0.4, .subset = TextFolderOptions::Subset::kTraining, .seed = 3});
  const Dataset validation = cohort::data::load_text_folder(
      dir.str(), b, {.validation_split = 0.4, .subset = TextFolderOptions::Subset::kValidation, .seed = 3});
  CHECK(training.size() == 3);
  CHECK(validation.size() == 2);
}

TEST_CASE("load_text_csv: a row per text, classes by name, quoted texts; shards, splits, TSV") {
  cohort::test::TempDir dir("text_csv");
  // As pandas writes it: an index column, a text holding the delimiter, quotes and a line break.
  spit(dir / "reviews.csv",
       ",text,label\n0,bad awful film,neg\n1,\"awful, \"\"the\"\" plot\",neg\n2,good film,pos\n"
       "3,\"good\ngood plot\",pos\n4,fine,pos\n");
  TextVectorizer whole({.sequence_length = 3});
  std::vector<std::string> classes;
  const Dataset all = cohort::data::load_text_csv(dir / "reviews.csv", whole, {}, &classes);
  CHECK(classes == std::vector<std::string>{"neg", "pos"});
  REQUIRE(all.size() == 5);
  CHECK(all.num_classes() == 2);
  CHECK(all.label(1) == 0);
  CHECK(all.label(3) == 1);
  // The folder test's texts, so its vocabulary: good 3, awful, film, plot 2, bad, fine and the 1.
  CHECK(whole.vocabulary() ==
        std::vector<std::string>{"", "[UNK]", "good", "awful", "film", "plot", "bad", "fine", "the"});
  const std::vector<std::string> texts = {"awful, \"the\" plot", "good\ngood plot"};
  const Tensor expected = whole.vectorize(texts);
  CHECK(ids(Tensor({3}, all.example(1))) == std::vector<float>(expected.data(), expected.data() + 3));
  CHECK(ids(Tensor({3}, all.example(3))) == std::vector<float>(expected.data() + 3, expected.data() + 6));
  // Every shard's worker adapts to the whole file and keeps its rows.
  for (int index = 0; index < 2; ++index) {
    TextVectorizer mine({.sequence_length = 3});
    const Dataset shard = cohort::data::load_text_csv(dir / "reviews.csv", mine, {.shard = {index, 2}});
    CHECK(mine.vocabulary() == whole.vocabulary());
    REQUIRE(shard.size() == (index == 0 ? 3 : 2));
    CHECK(shard.label(0) == all.label(index));
  }
  // validation_split parts the rows; a test file takes the training file's classes by name.
  TextVectorizer a, b;
  CHECK(cohort::data::load_text_csv(dir / "reviews.csv", a, {.validation_split = 0.4, .seed = 3}).size() == 3);
  CHECK(cohort::data::load_text_csv(dir / "reviews.csv", b,
                                    {.validation_split = 0.4,
                                     .subset = TextFolderOptions::Subset::kValidation, .seed = 3})
            .size() == 2);
  spit(dir / "test.csv", "text,label\nso good,pos\n");
  CHECK(cohort::data::load_text_csv(dir / "test.csv", whole, {.class_names = classes}).label(0) == 1);
  spit(dir / "other.csv", "text,label\nmeh,mixed\n");
  CHECK(data_error([&] { cohort::data::load_text_csv(dir / "other.csv", whole, {.class_names = classes}); }) ==
        dir / "other.csv" + ": line 2, column 1 ('label'): label 'mixed' is not one of the 2 classes "
                            "(class_names; the training file's)");
  CHECK(invalid_argument([&] { cohort::data::load_text_csv(dir / "reviews.csv", whole, {.text_column = "review"}); }) ==
        dir / "reviews.csv" + ": no column 'review' (columns: '', 'text', 'label')");
  // Classes by index: counted, or given for a test file (where pandas may write 1 as 1.0).
  spit(dir / "indices.csv", "text,label\ngood,1\nbad,0\n");
  std::vector<std::string> none = {"x"};
  CHECK(cohort::data::load_text_csv(dir / "indices.csv", whole, {}, &none).num_classes() == 2);
  CHECK(none.empty());
  spit(dir / "indices_test.csv", "text,label\nfine,1.0\n");
  CHECK(cohort::data::load_text_csv(dir / "indices_test.csv", whole, {.num_classes = 2}).label(0) == 1);
  // A TSV without a header or quoting (GLUE's): a quote is part of the text.
  spit(dir / "sst.tsv", "\" the rock \" is good\t1\nit 's \"bad\t0\n");
  TextVectorizer raw({.strip_punctuation = false});
  const Dataset sst = cohort::data::load_text_csv(
      dir / "sst.tsv", raw,
      {.text_column = "0", .label_column = "1", .delimiter = '\t', .header = false, .quotes = false});
  REQUIRE(sst.size() == 2);
  CHECK(sst.label(0) == 1);
  CHECK(std::find(raw.vocabulary().begin(), raw.vocabulary().end(), "\"bad") != raw.vocabulary().end());
}

TEST_CASE("load_text_folder: a folder without text files is a DataError naming it") {
  cohort::test::TempDir dir("text_folder");
  std::filesystem::create_directories(dir.path / "a");
  spit(dir / "a/x.csv", "1,2");
  TextVectorizer words;
  CHECK(data_error([&] { cohort::data::load_text_folder(dir.str(), words); }) ==
        dir.str() + ": no .txt text files in its 1 class subfolders (a)");
  CHECK(data_error([&] { cohort::data::load_text_folder(dir / "missing", words); }) ==
        dir / "missing" + ": no such folder");
}

TEST_CASE("load_text_folder: a binary file named .txt is refused; a file without a word is warned of") {
  cohort::test::TempDir dir("text_folder");
  write_folder(dir, {{"neg", "bad film"}, {"pos", "good film"}, {"pos", " \n\t"}});
  {
    cohort::test::StderrCapture err(dir / "stderr.txt");
    TextVectorizer words;
    CHECK(cohort::data::load_text_folder(dir.str(), words).size() == 3);
    const std::vector<std::string> lines = err.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].ends_with("warning: " + dir.str() + ": 1 text file without a word (one is " + dir.str() +
                             "/pos/2.txt): examples of padding alone"));
  }
  spit(dir / "neg/data.txt", std::string("\x89PNG\0\0", 6));
  TextVectorizer words;
  CHECK(data_error([&] { cohort::data::load_text_folder(dir.str(), words); }) ==
        dir / "neg/data.txt" + ": a NUL byte: not a text file (a binary file named .txt?)");
  spit(dir / "neg/data.txt", std::string("\xff\xfeh\0i\0", 6));  // Notepad's "Unicode"
  CHECK(data_error([&] { cohort::data::load_text_folder(dir.str(), words); }) ==
        dir / "neg/data.txt" + ": UTF-16 text (its byte-order mark says so): save it as UTF-8");
}

TEST_CASE("A vocabulary of characters survives its file: line feeds and backslashes escaped; CRLF read") {
  TextVectorizer characters({.split = TextOptions::Split::kCharacters, .strip_punctuation = false});
  const std::vector<std::string> texts = {"a b\nc\\d\r\n"};
  characters.adapt(texts);
  cohort::test::TempDir dir("text");
  characters.save_vocabulary(dir / "vocabulary.txt");
  TextVectorizer again({.split = TextOptions::Split::kCharacters, .strip_punctuation = false});
  again.load_vocabulary(dir / "vocabulary.txt");
  CHECK(again.vocabulary() == characters.vocabulary());
  CHECK(std::find(again.vocabulary().begin(), again.vocabulary().end(), "\n") !=
        again.vocabulary().end());
  // Lines ended by "\r\n" (a file saved on Windows), all of them or some.
  spit(dir / "crlf.txt", "\r\n[UNK]\r\ngood\nbad\r\n");
  TextVectorizer words;
  words.load_vocabulary(dir / "crlf.txt");
  CHECK(words.vocabulary() == std::vector<std::string>{"", "[UNK]", "good", "bad"});
  TextVectorizer empty;
  CHECK(invalid_argument([&] { empty.save_vocabulary(dir / "none.txt"); }) ==
        "TextVectorizer: no vocabulary to save to " + dir / "none.txt");
}

TEST_CASE("load_word_vectors: GloVe's lines and word2vec's header, zeros where a word has none") {
  const std::vector<std::string> vocabulary = {"", "[UNK]", "the", "cat", "sat"};
  cohort::test::TempDir dir("vectors");
  // GloVe: no header; a word outside the vocabulary, a repeated word (the first counts), a
  // blank line, and values in exponent notation.
  spit(dir / "glove.txt", "the 1 2 3\ndog 9 9 9\n\nsat -0.5 2.5e-1 4E1\nthe 7 7 7\n");
  std::int64_t found = -1;
  const Tensor glove = cohort::data::load_word_vectors(dir / "glove.txt", vocabulary, 3, &found);
  CHECK(found == 2);
  CHECK(glove.shape() == cohort::Shape{5, 3});
  CHECK(ids(glove) == std::vector<float>{0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, -0.5f, 0.25f, 40});
  // word2vec's text format: the same after a line of the count and the dimension.
  spit(dir / "word2vec.txt", "3 3\nthe 1 2 3\ndog 9 9 9\nsat -0.5 2.5e-1 4E1\n");
  CHECK(ids(cohort::data::load_word_vectors(dir / "word2vec.txt", vocabulary, 3, &found)) == ids(glove));
  CHECK(found == 2);
  // Only the first line may be a header: a later line of one number is a vector of length 1.
  spit(dir / "late_header.txt", "the 1 2 3\n3 3\n");
  CHECK(data_error([&] { cohort::data::load_word_vectors(dir / "late_header.txt", vocabulary, 3); }) ==
        dir / "late_header.txt" + ": line 2: the vector of '3' has 1 values, not 3 (the embedding's dimension)");
  spit(dir / "not_a_number.txt", "the 1 2 3\ncat 1 x 3\n");
  CHECK(data_error([&] { cohort::data::load_word_vectors(dir / "not_a_number.txt", vocabulary, 3); }) ==
        dir / "not_a_number.txt" + ": line 2: a value of 'cat' is not a number (or is out of float's range)");
  // A header whose dimension is not the embedding's, a file without vectors, a binary file.
  spit(dir / "header_dim.txt", "3 100\nthe 1 2 3\n");
  CHECK(data_error([&] { cohort::data::load_word_vectors(dir / "header_dim.txt", vocabulary, 3); }) ==
        dir / "header_dim.txt" +
            ": line 1: word2vec's header gives vectors of dimension 100, not 3 (the embedding's dimension)");
  spit(dir / "blank.txt", "\n\n");
  CHECK(data_error([&] { cohort::data::load_word_vectors(dir / "blank.txt", vocabulary, 3); }) ==
        dir / "blank.txt" + ": no word vectors in it");
  spit(dir / "binary.bin", std::string("the\0\x01\x02", 6));
  CHECK(data_error([&] { cohort::data::load_word_vectors(dir / "binary.bin", vocabulary, 3); })
            .starts_with(dir / "binary.bin" + ": line 1: a NUL byte: not a text file of word vectors"));
  CHECK(invalid_argument([&] { cohort::data::load_word_vectors(dir / "glove.txt", vocabulary, 0); }) ==
        dir / "glove.txt" + ": word vectors of dimension 0");
}
