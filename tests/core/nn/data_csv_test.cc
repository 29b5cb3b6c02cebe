// CSV loading: files written in a temp dir, every kind of bad file, and shards.

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "cohort/core/nn/data/loaders.h"
#include "loader_checks.h"
#include "support/skip.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

using cohort::Shape;
using cohort::data::CsvOptions;
using cohort::data::Dataset;
using cohort::test::check_same_dataset;
using cohort::test::data_error;
using cohort::test::invalid_argument;
using cohort::test::spit;
using cohort::test::status_kib;
using cohort::test::write_gzip;
using cohort::test::TempDir;

namespace {

Dataset csv(const TempDir& dir, const std::string& text, const CsvOptions& options,
            std::vector<std::string>* feature_columns = nullptr) {
  spit(dir / "t.csv", text);
  return cohort::data::load_csv(dir / "t.csv", options, feature_columns);
}

std::string csv_error(const TempDir& dir, const std::string& text, const CsvOptions& options) {
  return data_error([&] { csv(dir, text, options); });
}

std::vector<std::int32_t> labels(const Dataset& d) {
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < d.size(); ++i) out.push_back(d.label(i));
  return out;
}

std::vector<float> example(const Dataset& d, std::int64_t i) {
  const auto e = d.example(i);
  return {e.begin(), e.end()};
}

}  // namespace

TEST_CASE("CSV: a header and a label column by name") {
  TempDir dir("data_loaders_test");
  const Dataset d = csv(dir, "a, label ,b\n1.5,2,-3\n\n4e1,0,+6\n", {.label_column = "label"});
  CHECK(d.size() == 2);
  CHECK(d.example_shape() == Shape{2});
  REQUIRE(d.has_labels());
  CHECK(d.num_classes() == 3);
  CHECK(d.label(0) == 2);
  CHECK(d.label(1) == 0);
  CHECK(example(d, 0) == std::vector<float>{1.5f, -3});
  CHECK(example(d, 1) == std::vector<float>{40, 6});
  CHECK(d.name() == dir / "t.csv");
  // An index as text works with a header too; num_classes as given.
  const Dataset by_index = csv(dir, "a,label,b\n1,2,3\n", {.label_column = "1", .num_classes = 4});
  CHECK(by_index.num_classes() == 4);
  CHECK(example(by_index, 0) == std::vector<float>{1, 3});
}

TEST_CASE("CSV: a label column that counts far more classes than rows is warned of") {
  TempDir dir("data_loaders_test");
  std::vector<std::string> lines;
  {
    cohort::test::StderrCapture err(dir / "stderr.txt");
    const Dataset prices = csv(dir, "a,price\n1,250000\n2,180500\n", {.label_column = "price"});
    CHECK(prices.num_classes() == 250001);
    const Dataset classes = csv(dir, "a,class\n1,2\n2,1500\n", {.label_column = "class", .num_classes = 2000});
    CHECK(classes.num_classes() == 2000);  // given: no warning
    lines = err.lines();
  }
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("warning: " + dir / "t.csv" + ": label column 'price' counts 250001 classes "
                      "(its largest label + 1) for 2 rows: values to predict are target_columns, "
                      "not a label") != std::string::npos);
}

TEST_CASE("CSV: classes counted without an example (a mistyped label) are warned of, once") {
  TempDir dir("data_loaders_test");
  std::vector<std::string> lines;
  {
    cohort::test::StderrCapture err(dir / "stderr.txt");
    const std::string table = "a,y\n1,0\n2,1\n3,7\n4,1\n";
    CHECK(csv(dir, table, {.label_column = "y"}).num_classes() == 8);
    CHECK(csv(dir, table, {.label_column = "y", .shard = {1, 2}}).num_classes() == 8);  // shard 0 warns
    CHECK(csv(dir, table, {.label_column = "y", .num_classes = 8}).num_classes() == 8);  // as asked
    CHECK(csv(dir, "a,y\n1,0\n2,1\n", {.label_column = "y"}).num_classes() == 2);
    lines = err.lines();
  }
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].ends_with("warning: " + dir / "t.csv" + ": label column 'y': 8 classes counted as the "
                           "largest label + 1, 5 of which no example has (2, 3, 4, 5, 6): a mistyped "
                           "label? (a num_classes given refuses labels from it on)"));
}

TEST_CASE("CSV: no header, columns by index; targets; chosen features; delimiters; CRLF") {
  TempDir dir("data_loaders_test");
  const Dataset plain = csv(dir, "0,1,2\n1,3,4\n2,5,6\n", {.header = false, .label_column = "0"});
  CHECK(plain.size() == 3);
  CHECK(plain.label(2) == 2);
  CHECK(example(plain, 1) == std::vector<float>{3, 4});

  const Dataset targets =
      csv(dir, "x1,x2,y1,y2\n1,2,0.5,-1\n3,4,1.5,-2\n", {.target_columns = {"y2", "y1"}});
  REQUIRE_FALSE(targets.has_labels());
  CHECK(targets.target_shape() == Shape{2});
  CHECK(targets.target(1)[0] == -2.0f);
  CHECK(targets.target(1)[1] == 1.5f);
  CHECK(example(targets, 1) == std::vector<float>{3, 4});

  // Chosen features skip the others, even text ones; in the order given.
  const Dataset chosen = csv(dir, "id,a,b,c,label\nfoo,1,2,3,1\nbar,4,5,6,0\n",
                             {.label_column = "label", .feature_columns = {"c", "a"}});
  CHECK(example(chosen, 1) == std::vector<float>{6, 4});
  // Or every other column but those ignored, text ones among them, in the file's order.
  std::vector<std::string> used;
  const Dataset ignored = csv(dir, "id,a,note,b,label\nfoo,1,\"x, y\",2,1\nbar,4,z,5,0\n",
                              {.label_column = "label", .ignore_columns = {"note", "id"}}, &used);
  CHECK(example(ignored, 1) == std::vector<float>{4, 5});
  CHECK(used == std::vector<std::string>{"a", "b"});

  const Dataset semicolon = csv(dir, "a;b;y\r\n1;2;3\r\n\r\n  \r\n4 ; 5;6\r\n",
                                {.delimiter = ';', .target_columns = {"y"}});
  CHECK(semicolon.size() == 2);
  CHECK(example(semicolon, 1) == std::vector<float>{4, 5});
  CHECK(semicolon.target(1)[0] == 6.0f);

  const Dataset tabs = csv(dir, "\xef\xbb\xbf\"a\"\t\"y\"\n1\t2\n", {.delimiter = '\t',
                                                                      .target_columns = {"y"}});
  CHECK(tabs.target(0)[0] == 2.0f);
  // No final newline; a subnormal float; a label written as 2.0.
  const Dataset last = csv(dir, "a,l\n1e-40,2.0", {.label_column = "l"});
  CHECK(last.label(0) == 2);
  CHECK(example(last, 0)[0] == 1e-40f);
}

TEST_CASE("CSV: quoted fields as RFC 4180 and pandas write them") {
  TempDir dir("data_csv_quotes");
  // A delimiter inside quotes is data; "" is one quote; blanks inside the quotes are dropped.
  spit(dir / "q.csv", "\"height, cm\",\"the \"\"x\"\" col\",label\r\n\" 1.5\",\"-2\",\"1\"\r\n3,\"4\" ,0\n");
  const Dataset quoted = cohort::data::load_csv(dir / "q.csv", {.label_column = "label"});
  REQUIRE(quoted.size() == 2);
  CHECK(example(quoted, 0) == std::vector<float>{1.5f, -2});
  CHECK(example(quoted, 1) == std::vector<float>{3, 4});
  CHECK(quoted.label(0) == 1);
  std::vector<std::string> used;
  cohort::data::load_csv(dir / "q.csv", {.label_column = "label", .feature_columns = {"the \"x\" col"}}, &used);
  CHECK(used == std::vector<std::string>{"the \"x\" col"});
  // A tab-delimited file keeps its empty fields (a missing value is still refused, by column).
  CHECK(csv_error(dir, "a\tb\ty\n1\t\t2\n", {.delimiter = '\t', .target_columns = {"y"}})
            .find("line 2, column 1 ('b'): empty field") != std::string::npos);

  CHECK(csv_error(dir, "a,y\n\"1,2\n3,4\n", {.target_columns = {"y"}}) ==
        (dir / "t.csv") + ": line 2: a quoted field does not end before the file does");
  // A quoted field may hold line breaks (a comment column, say): its record goes on over the
  // lines, CRLF ones too, and the lines after it are counted on.
  spit(dir / "n.csv", "note,a,y\r\n\"two\r\nlines\",1,2\r\nx,3,4\r\n\"a \"\"quote\"\"\n\",5,6\n");
  const Dataset noted = cohort::data::load_csv(dir / "n.csv", {.target_columns = {"y"}, .ignore_columns = {"note"}});
  REQUIRE(noted.size() == 3);
  CHECK(example(noted, 2) == std::vector<float>{5});
  // A quote inside an unquoted field after the record's closing quote is a character (5" wide).
  spit(dir / "inch.csv", "id,text,note,size\n1,\"two\nlines\",5\" wide,3\n2,\"x\",y,4\n");
  const Dataset inch = cohort::data::load_csv(dir / "inch.csv", {.target_columns = {"id"}, .feature_columns = {"size"}});
  REQUIRE(inch.size() == 2);
  CHECK(example(inch, 1) == std::vector<float>{4});
  CHECK(csv_error(dir, "note,y\n\"a\nb\"x,1\n", {.target_columns = {"y"}}) ==
        (dir / "t.csv") + ": lines 2-3: text after a field's closing quote");
  CHECK(csv_error(dir, "note,a,y\n\"a\nb\",1,2\nc,3,x\n", {.target_columns = {"y"}, .ignore_columns = {"note"}}) ==
        (dir / "t.csv") + ": line 4, column 2 ('y'): 'x' is not a number");
  // A quote left open by mistake fails where its record passes 16 MiB, not at the file's end.
  std::string stray = "note,a,y\n\"a,1,2\n";
  while (stray.size() < (std::size_t{17} << 20)) stray += "more text here,1,2\n";
  CHECK(csv_error(dir, stray, {.target_columns = {"y"}, .ignore_columns = {"note"}})
            .starts_with(dir / "t.csv" + ": line 2: a quoted field runs on over "));
  // Without quotes, a quote is a character like any other.
  CHECK(csv_error(dir, "a,y\n\"1\",2\n", {.quotes = false, .target_columns = {"y"}}) ==
        (dir / "t.csv") + ": line 2, column 0 ('a'): '\"1\"' is not a number");
  CHECK(csv_error(dir, "a,y\n\"1\"x,2\n", {.target_columns = {"y"}}) ==
        (dir / "t.csv") + ": line 2: text after a field's closing quote");
}

TEST_CASE("CSV errors name the file, the line and the column") {
  TempDir dir("data_loaders_test");
  const std::string path = dir / "t.csv";
  CHECK(csv_error(dir, "a,b,label\n1,2,0\n3,x7,1\n", {.label_column = "label"}) ==
        path + ": line 3, column 1 ('b'): 'x7' is not a number");
  CHECK(csv_error(dir, "1,2,0\n3,,1\n", {.header = false, .label_column = "2"}) ==
        path + ": line 2, column 1: empty field, expected a number");
  CHECK(csv_error(dir, "a,b,label\n1,2,0\n\n3,1\n", {.label_column = "label"}) ==
        path + ": line 4 has 2 fields, expected 3 (as line 1)");
  CHECK(csv_error(dir, "a,b,label\n1,2,0.5\n", {.label_column = "label"}) ==
        path + ": line 2, column 2 ('label'): label '0.5' is not an integer");
  CHECK(csv_error(dir, "a,b,label\n1,2,-1\n", {.label_column = "label"}) ==
        path + ": line 2, column 2 ('label'): label -1 is negative");
  CHECK(csv_error(dir, "a,label\n1,3\n", {.label_column = "label", .num_classes = 3}) ==
        path + ": line 2, column 1 ('label'): label 3 is outside [0, 3)");
  CHECK(csv_error(dir, "a,y\n1,1e39\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 1 ('y'): '1e39' is out of range for float32");
  CHECK(csv_error(dir, "a,y\n+-1,1\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 0 ('a'): '+-1' is not a number");
  CHECK(csv_error(dir, "a,y\n1,2 3\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 1 ('y'): '2 3' is not a number");
  CHECK(csv_error(dir, "a,y\n1,1e39x\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 1 ('y'): '1e39x' is not a number");
  CHECK(csv_error(dir, "", {.label_column = "0"}) == path + ": empty file: no rows");
  CHECK(csv_error(dir, "\n  \n", {.label_column = "0"}) == path + ": empty file: no rows");
  CHECK(csv_error(dir, "a,label\n\n", {.label_column = "label"}) ==
        path + ": no data rows, only a header");
  CHECK(csv_error(dir, "label\n1\n", {.label_column = "label"}) ==
        path + ": no feature columns: all 1 columns are the label or targets");
  CHECK(csv_error(dir, "id,label\nx,1\n", {.label_column = "label", .ignore_columns = {"id"}}) ==
        path + ": no feature columns: all 2 columns are the label, targets or ignored");
  // Control bytes (a terminal escape, a NUL) are escaped; a name given twice is refused.
  CHECK(csv_error(dir, "a,y\n\033[31m,1\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 0 ('a'): '\\x1b[31m' is not a number");
  CHECK(csv_error(dir, std::string("a,y\n1\0,1\n", 9), {.target_columns = {"y"}}) ==
        path + ": line 2, column 0 ('a'): '1\\x00' is not a number");
  CHECK(csv_error(dir, "a,cls,cls\n1,2,3\n", {.label_column = "cls"}) ==
        path + ": the header names column 1 and column 2 both 'cls'");
  // A name given twice but never used is no harm.
  CHECK(csv(dir, "a,a,cls\n1,2,3\n", {.label_column = "cls"}).size() == 1);
  // A feature column without a name, such as the row index pandas writes first, is refused
  // rather than learned from; left out, the rest is read.
  CHECK(csv_error(dir, ",a,label\n0,1.5,0\n1,2.5,1\n", {.label_column = "label"}) ==
        path + ": column 0 has no name in the header (the row index pandas writes unless to_csv "
               "is given index=False?): name it, or leave it out with ignore_columns (\"0\")");
  CHECK(csv_error(dir, "a, ,label\n0,1,0\n", {.label_column = "label"}) ==
        path + ": column 1 has no name in the header: name it, or leave it out with ignore_columns (\"1\")");
  std::vector<std::string> named;
  const Dataset indexed = csv(dir, ",a,label\n0,1.5,0\n1,2.5,1\n", {.label_column = "label", .ignore_columns = {"0"}}, &named);
  CHECK(named == std::vector<std::string>{"a"});
  CHECK(example(indexed, 1) == std::vector<float>{2.5f});
  // Chosen by index as a feature, it is the user's to name.
  CHECK(example(csv(dir, ",a,label\n0,1.5,0\n1,2.5,1\n", {.label_column = "label", .feature_columns = {"0", "a"}}), 1) ==
        std::vector<float>{1.0f, 2.5f});
  // UTF-16 (Windows' "Unicode"), told by its byte-order mark.
  CHECK(csv_error(dir, std::string("\xff\xfe" "a\0,\0y\0\n\0", 10), {.target_columns = {"y"}}) ==
        path + ": UTF-16 text (its byte-order mark says so): save it as UTF-8");
  CHECK(data_error([&] { cohort::data::load_csv(dir / "none.csv", {.label_column = "a"}); }) ==
        dir / "none.csv" + ": no such file");

  // The caller's mistakes are InvalidArgument.
  spit(path, "a,b,label\n1,2,0\n");
  const auto invalid = [&](const CsvOptions& options) {
    return invalid_argument([&] { cohort::data::load_csv(path, options); });
  };
  CHECK(invalid({.label_column = "class"}) ==
        path + ": no column 'class' (columns: 'a', 'b', 'label')");
  CHECK(invalid({.label_column = "3"}) == path + ": no column '3' (columns: 'a', 'b', 'label')");
  CHECK(invalid({.header = false, .label_column = "label"}) ==
        path + ": no column 'label' (columns: 0 to 2 (no header))");
  CHECK(invalid({.label_column = "label", .feature_columns = {"a", "z"}}) ==
        path + ": no column 'z' (columns: 'a', 'b', 'label')");
  CHECK(invalid({}) == path + ": load_csv needs a label_column or target_columns");
  CHECK(invalid({.label_column = "label", .target_columns = {"a"}}) ==
        path + ": load_csv takes a label_column or target_columns, not both");
  // A column has one role: the label among the features would be learned from itself.
  CHECK(invalid({.label_column = "label", .feature_columns = {"a", "label"}}) ==
        path + ": column 'label' is given as the label and as a feature");
  CHECK(invalid({.label_column = "2", .feature_columns = {"label"}}) ==
        path + ": column 'label' is given as the label and as a feature");
  CHECK(invalid({.target_columns = {"b", "label"}, .feature_columns = {"a", "b"}}) ==
        path + ": column 'b' is given as a target and as a feature");
  CHECK(invalid({.target_columns = {"b", "b"}}) == path + ": column 'b' is given as a target and as a target");
  CHECK(invalid({.label_column = "label", .feature_columns = {"a", "a"}}) ==
        path + ": column 'a' is given as a feature and as a feature");
  CHECK(invalid({.label_column = "label", .ignore_columns = {"c"}}) ==
        path + ": no column 'c' (columns: 'a', 'b', 'label')");
  CHECK(invalid({.label_column = "label", .ignore_columns = {"label"}}) ==
        path + ": column 'label' is given as the label and as ignored");
  CHECK(invalid({.label_column = "label", .feature_columns = {"a"}, .ignore_columns = {"b"}}) ==
        path + ": give feature_columns or ignore_columns, not both");
}

TEST_CASE("CSV: missing values, CR line ends, and a column spec that is ambiguous") {
  TempDir dir("data_loaders_test");
  const std::string path = dir / "t.csv";
  CHECK(csv_error(dir, "a,y\n1,2\nnan,3\n", {.target_columns = {"y"}}) ==
        path + ": line 3, column 0 ('a'): 'nan' is not a finite number (a missing value?)");
  CHECK(csv_error(dir, "a,y\n1,-inf\n", {.target_columns = {"y"}}) ==
        path + ": line 2, column 1 ('y'): '-inf' is not a finite number (a missing value?)");
  CHECK(csv_error(dir, "a,y\r1,2\r3,4\r", {.target_columns = {"y"}}) ==
        path + ": its lines end in CR alone (old Mac OS): save it with LF or CRLF line ends");
  // A file without a header, read as if it had one: a column given by index names another one
  // there (and a warning says the header holds numbers only). Numbers may be names, though.
  spit(path, "4,3,5,0\n1,2,3,1\n");
  CHECK(invalid_argument([&] { cohort::data::load_csv(path, {.label_column = "3"}); }) ==
        path + ": column '3' is ambiguous: the header names column 1 so, and it is also the "
               "index of column 3 ('0')");
  const Dataset spectra = csv(dir, "400,410,420,label\n0.1,0.2,0.3,1\n", {.label_column = "label"});
  CHECK(spectra.size() == 1);
  CHECK(example(spectra, 0) == std::vector<float>{0.1f, 0.2f, 0.3f});
  // Columns named by their own indices (pandas' unnamed columns) are a header.
  const Dataset pandas = csv(dir, "0,1,2\n1.5,2.5,1\n", {.label_column = "2"});
  CHECK(pandas.size() == 1);
  CHECK(example(pandas, 0) == std::vector<float>{1.5f, 2.5f});
  spit(path, "a,2,b,c\n1,2,3,0\n");
  CHECK(invalid_argument([&] { cohort::data::load_csv(path, {.label_column = "2"}); }) ==
        path + ": column '2' is ambiguous: the header names column 1 so, and it is also the "
               "index of column 2 ('b')");
}

TEST_CASE("CSV: a shard, read alone, is the table's shard; every row is still checked") {
  TempDir dir("data_loaders_test");
  std::string rows;
  for (int r = 0; r < 10; ++r) {  // the largest label (5) in row 7 only; blank lines between
    rows += std::to_string(r) + "," + std::to_string(r * r) + "," +
            (r == 7 ? "5" : std::to_string(r % 3)) + "," + std::to_string(r) + ".5\n";
    if (r == 2) rows += "\n";
    if (r == 5) rows += " \r\n";
  }
  CsvOptions labels;
  labels.label_column = "label";
  labels.feature_columns = {"a", "b"};
  CsvOptions prices;
  prices.target_columns = {"price"};
  CsvOptions no_header;
  no_header.header = false;
  no_header.label_column = "2";
  no_header.feature_columns = {"0", "1"};
  for (CsvOptions options : {labels, prices, no_header}) {
    const std::string text = options.header ? "a,b,label,price\n" + rows : rows;
    const Dataset whole = csv(dir, text, options);
    REQUIRE(whole.size() == 10);
    for (const int count : {1, 2, 3, 4, 11}) {
      for (int index = 0; index < count; ++index) {
        CAPTURE(count);
        CAPTURE(index);
        options.shard = {index, count};
        check_same_dataset(csv(dir, text, options), whole.shard(index, count));
      }
    }
  }
  // Rows outside the shard are checked: a feature, a label, a target.
  CsvOptions bad = labels;
  bad.shard = {0, 2};
  CHECK(csv_error(dir, "a,b,label\n1,2,0\n3,x,1\n", bad) ==
        dir / "t.csv" + ": line 3, column 1 ('b'): 'x' is not a number");
  CHECK(csv_error(dir, "a,b,label\n1,2,0\n3,4,-1\n", bad) ==
        dir / "t.csv" + ": line 3, column 2 ('label'): label -1 is negative");
  bad.num_classes = 2;
  CHECK(csv_error(dir, "a,b,label\n1,2,0\n3,4,2\n", bad) ==
        dir / "t.csv" + ": line 3, column 2 ('label'): label 2 is outside [0, 2)");
  CsvOptions bad_target = prices;
  bad_target.shard = {0, 2};
  CHECK(csv_error(dir, "a,price\n1,2\n3,x\n", bad_target) ==
        dir / "t.csv" + ": line 3, column 1 ('price'): 'x' is not a number");
  bad.shard = {2, 2};
  CHECK(invalid_argument([&] { csv(dir, rows, bad); }) ==
        dir / "t.csv" + ": shard index 2 of count 2 (need 0 <= index < count)");
}

TEST_CASE("CSV: a label column of class names, numbered in sorted order, the same in every shard and file") {
  TempDir dir("data_loaders_test");
  const std::string rows = "x,species\n1,virginica\n2,setosa\n3,versicolor\n4,setosa\n5,\"virginica\"\n";
  spit(dir / "train.csv", rows);
  std::vector<std::string> classes;
  const Dataset whole = cohort::data::load_csv(dir / "train.csv", {.label_column = "species"}, nullptr, &classes);
  CHECK(classes == std::vector<std::string>{"setosa", "versicolor", "virginica"});
  CHECK(whole.num_classes() == 3);
  CHECK(labels(whole) == std::vector<std::int32_t>{2, 0, 1, 0, 2});
  // A shard numbers them alike: every row's name is read.
  for (int index = 0; index < 2; ++index) {
    CAPTURE(index);
    std::vector<std::string> shard_classes;
    const Dataset shard = cohort::data::load_csv(
        dir / "train.csv", {.label_column = "species", .shard = {index, 2}}, nullptr, &shard_classes);
    CHECK(shard_classes == classes);
    check_same_dataset(shard, whole.shard(index, 2));
  }
  // A test file, read with the training file's names: a number there is a name too, and one
  // the training file lacks is refused, naming the line.
  spit(dir / "test.csv", "species,x\nsetosa,7\nvirginica,8\n");
  const Dataset test = cohort::data::load_csv(dir / "test.csv", {.label_column = "species", .class_names = classes});
  CHECK(test.num_classes() == 3);
  CHECK(labels(test) == std::vector<std::int32_t>{0, 2});
  spit(dir / "other.csv", "species,x\nsetosa,7\niris,8\n");
  CHECK(data_error([&] { cohort::data::load_csv(dir / "other.csv", {.label_column = "species", .class_names = classes}); }) ==
        dir / "other.csv" + ": line 3, column 0 ('species'): label 'iris' is not one of the 3 classes (class_names; "
                            "the training file's)");
  // A column of numbers read as names when names are given: "1" is the class named 1.
  spit(dir / "numbers.csv", "x,y\n1,2\n2,1\n");
  CHECK(labels(cohort::data::load_csv(dir / "numbers.csv", {.label_column = "y", .class_names = {"1", "2"}})) ==
        std::vector<std::int32_t>{1, 0});
  // The first row decides: indices, then a name; or names, then an empty label.
  CHECK(csv_error(dir, "x,y\n1,0\n2,cat\n", {.label_column = "y"}) ==
        dir / "t.csv" + ": line 3, column 1 ('y'): label 'cat' is a name, where the first row's is a class index "
                        "(a column of class names must start with a name)");
  CHECK(csv_error(dir, "x,y\n1,cat\n2,\n", {.label_column = "y"}) ==
        dir / "t.csv" + ": line 3, column 1 ('y'): empty label, expected a class name");
  CHECK(csv_error(dir, "x,y\n1,\n2,0\n", {.label_column = "y"}) ==
        dir / "t.csv" + ": line 2, column 1 ('y'): empty label, expected a class index");
  // Names where indices were asked for (a test file of a table whose training file has indices).
  CHECK(csv_error(dir, "x,y\n1,dog\n2,cat\n", {.label_column = "y", .num_classes = 3}) ==
        dir / "t.csv" + ": label column 'y' holds class names ('cat', ...) where class indices below 3 "
                        "were asked for (num_classes)");
  CHECK(invalid_argument([&] { cohort::data::load_csv(dir / "train.csv", {.label_column = "species", .num_classes = 3,
                                                                          .class_names = classes}); }) ==
        dir / "train.csv" + ": load_csv takes class_names or num_classes, not both");
  CHECK(invalid_argument([&] { cohort::data::load_csv(dir / "train.csv", {.label_column = "species",
                                                                          .class_names = {"a", "a"}}); }) ==
        dir / "train.csv" + ": class_names holds 'a' twice");
}

TEST_CASE("CSV: a second file of the same table, its columns in another order, matched by name") {
  TempDir dir("data_loaders_test");
  std::vector<std::string> features;
  spit(dir / "train.csv", "a,b,label,c\n1,2,0,3\n");
  const Dataset train = cohort::data::load_csv(dir / "train.csv", {.label_column = "label"}, &features);
  CHECK(features == std::vector<std::string>{"a", "b", "c"});
  spit(dir / "test.csv", "label,c,a,b\n1,30,10,20\n");
  const Dataset test = cohort::data::load_csv(
      dir / "test.csv", {.label_column = "label", .feature_columns = features}, &features);
  CHECK(example(train, 0) == std::vector<float>{1, 2, 3});
  CHECK(example(test, 0) == std::vector<float>{10, 20, 30});
  CHECK(features == std::vector<std::string>{"a", "b", "c"});
  // Without a header, by index.
  spit(dir / "plain.csv", "7,8,1\n");
  cohort::data::load_csv(dir / "plain.csv", {.header = false, .label_column = "1"}, &features);
  CHECK(features == std::vector<std::string>{"0", "2"});
}

TEST_CASE("CSV: a series forecast from its own past: its target columns as features too") {
  TempDir dir("data_loaders_test");
  std::vector<std::string> features;
  const std::string series = "y\n1\n2\n3\n";
  // A target among the features would be learned from itself: refused unless asked for.
  CHECK(csv_error(dir, series, {.target_columns = {"y"}}).find("no feature columns") != std::string::npos);
  const Dataset own = csv(dir, series, {.target_columns = {"y"}, .targets_as_features = true}, &features);
  CHECK(features == std::vector<std::string>{"y"});
  CHECK(example(own, 2) == std::vector<float>{3});
  CHECK(own.target(2)[0] == 3.0f);
  // Named among the features, beside another column; a second file of the table matched by name.
  const std::string table = "x,y\n10,1\n20,2\n";
  CHECK(invalid_argument([&] { csv(dir, table, {.target_columns = {"y"}, .feature_columns = {"x", "y"}}); })
            .find("column 'y' is given as a target and as a feature") != std::string::npos);
  const Dataset both =
      csv(dir, table, {.target_columns = {"y"}, .feature_columns = {"x", "y"}, .targets_as_features = true}, &features);
  CHECK(example(both, 1) == std::vector<float>{20, 2});
  CHECK(both.target(1)[0] == 2.0f);
  // Where other columns are left, they alone are the features by default.
  csv(dir, table, {.target_columns = {"y"}, .targets_as_features = true}, &features);
  CHECK(features == std::vector<std::string>{"x"});
}

TEST_CASE("CSV: new rows to predict, the training file's feature columns alone") {
  TempDir dir("data_loaders_test");
  // In another order, with an id column of text and no label: neither is read.
  spit(dir / "new.csv", "id,c,a,b\nx,30,10,20\ny,31,11,21\n");
  const cohort::Tensor x = cohort::data::load_csv_features(dir / "new.csv", {.feature_columns = {"a", "b", "c"}});
  CHECK(x.shape() == Shape{2, 3});
  CHECK(std::vector<float>(x.data(), x.data() + x.size()) == std::vector<float>{10, 20, 30, 11, 21, 31});
  CHECK(invalid_argument([&] {
          cohort::data::load_csv_features(dir / "new.csv", {.label_column = "id", .feature_columns = {"a"}});
        }).ends_with("new.csv: load_csv_features reads features alone: no label_column or target_columns "
                     "(other columns are not read)"));
  CHECK(invalid_argument([&] { cohort::data::load_csv_features(dir / "new.csv", {}); })
            .ends_with("new.csv: load_csv_features needs the feature_columns"));
  CHECK(invalid_argument([&] {
          cohort::data::load_csv_features(dir / "new.csv", {.feature_columns = {"a", "d"}});
        }).ends_with("new.csv: no column 'd' (columns: 'id', 'c', 'a', 'b')"));
  spit(dir / "bad.csv", "a,b\n1,\n");
  CHECK(data_error([&] { cohort::data::load_csv_features(dir / "bad.csv", {.feature_columns = {"a", "b"}}); })
            .ends_with("bad.csv: line 2, column 1 ('b'): empty field, expected a number"));
}

TEST_CASE("CSV: rows to predict a batch at a time, as load_csv_features reads them whole") {
  TempDir dir("data_loaders_test");
  std::string text = "id,c,a,b\n";
  for (int r = 0; r < 10; ++r)
    text += "row" + std::to_string(r) + "," + std::to_string(3 * r) + "," + std::to_string(r) + ",0.5\n";
  spit(dir / "new.csv", text);
  const cohort::data::CsvOptions options{.feature_columns = {"a", "b", "c"}};
  const cohort::Tensor whole = cohort::data::load_csv_features(dir / "new.csv", options);
  std::vector<float> joined;
  std::vector<std::int64_t> sizes;
  cohort::data::for_each_csv_features_batch(dir / "new.csv", options, 4, [&](const cohort::Tensor& rows) {
    REQUIRE(rows.dim(1) == 3);
    sizes.push_back(rows.dim(0));
    joined.insert(joined.end(), rows.data(), rows.data() + rows.size());
  });
  CHECK(sizes == std::vector<std::int64_t>{4, 4, 2});
  CHECK(joined == std::vector<float>(whole.data(), whole.data() + whole.size()));
  sizes.clear();
  cohort::data::for_each_csv_features_batch(dir / "new.csv", options, 5, [&](const cohort::Tensor& rows) {
    sizes.push_back(rows.dim(0));
  });
  CHECK(sizes == std::vector<std::int64_t>{5, 5});
  CHECK(invalid_argument([&] {
          cohort::data::for_each_csv_features_batch(dir / "new.csv", options, 0, [](const cohort::Tensor&) {});
        }).ends_with("new.csv: a batch of 0 rows"));

  // A bad row after two batches: they were taken, and the fault names its line.
  spit(dir / "bad.csv", text + "row10,30,x,0.5\n");
  sizes.clear();
  CHECK(data_error([&] {
          cohort::data::for_each_csv_features_batch(dir / "bad.csv", options, 4, [&](const cohort::Tensor& rows) {
            sizes.push_back(rows.dim(0));
          });
        }).ends_with("bad.csv: line 12, column 2 ('a'): 'x' is not a number"));
  CHECK(sizes == std::vector<std::int64_t>{4, 4});
}

// ---- scale ---------------------------------------------------------------------------------

TEST_CASE("CSV: read a piece at a time: lines across pieces, a line longer than one, gzip") {
  TempDir dir("data_loaders_test");
  // 2.6 MB of rows: lines cross the 1 MB pieces' ends.
  std::string text = "x,y,label\n";
  for (int i = 0; i < 120000; ++i)
    text += std::to_string(i) + ".25," + std::to_string(-i) + ",  " + std::to_string(i % 7) + "\n";
  const Dataset plain = csv(dir, text, {.label_column = "label"});
  REQUIRE(plain.size() == 120000);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < plain.size(); ++i) {
    const auto x = static_cast<float>(i);
    wrong += example(plain, i) != std::vector<float>{x + 0.25f, -x} || plain.label(i) != i % 7;
  }
  CHECK(wrong == 0);
  // The same gzip-compressed, told by its magic bytes; a cut stream is an error, not fewer rows.
  write_gzip(dir / "t.csv.gz", text);
  check_same_dataset(cohort::data::load_csv(dir / "t.csv.gz", {.label_column = "label"}), plain);
  const std::string gz = cohort::test::slurp(dir / "t.csv.gz");
  spit(dir / "cut.csv.gz", gz.substr(0, gz.size() / 2));
  CHECK(data_error([&] { cohort::data::load_csv(dir / "cut.csv.gz", {.label_column = "label"}); }) ==
        dir / "cut.csv.gz" + ": the gzip stream ends early (a truncated file)");

  // One row of 300000 columns (2.4 MB), longer than a piece, and no final line break.
  std::string wide, values;
  for (int c = 0; c < 300000; ++c) {
    wide += "c" + std::to_string(c) + ",";
    values += std::to_string(c % 10) + ",";
  }
  const Dataset row = csv(dir, wide + "label\n" + values + "4", {.label_column = "label"});
  REQUIRE(row.size() == 1);
  CHECK(row.example_size() == 300000);
  CHECK(row.example(0)[299999] == 9.0f);
  CHECK(row.label(0) == 4);
}

TEST_CASE("CSV: a worker reading its shard of a large file holds its share, not the file's text") {
  TempDir dir("data_loaders_test");
  std::string text = "a,b,c,label\n";
  for (int i = 0; text.size() < (48u << 20); ++i)
    text += std::to_string(i) + ",0.5,-1.25," + std::to_string(i % 10) + "\n";
  spit(dir / "big.csv", text);
  const std::size_t file_bytes = text.size();
  text = std::string();
  text.shrink_to_fit();
  // The peak is measured from here: "5" to clear_refs resets VmHWM to the current RSS (Linux).
  std::ofstream clear("/proc/self/clear_refs");
  if (!(clear << "5" << std::flush))
    return cohort::test::skip("cannot reset the peak resident size (/proc/self/clear_refs)");
  const long before = status_kib("VmRSS");
  CsvOptions options{.label_column = "label"};
  options.shard = {0, 8};
  const Dataset shard = cohort::data::load_csv(dir / "big.csv", options);
  // (The kernel updates VmHWM lazily: it may lag the current RSS.)
  const long peak = std::max(status_kib("VmHWM"), status_kib("VmRSS"));
  REQUIRE(before > 0);
  MESSAGE("a 1/8 shard of a " << file_bytes / (1 << 20) << " MB CSV: peak resident +"
                              << (peak - before) / 1024 << " MB");
  CHECK(shard.size() > 0);
  // The shard's values are about 4 MB (with the growth of their arrays and one copy, some 14);
  // the file's text alone would be 48.
  CHECK((peak - before) * 1024 < static_cast<long>(file_bytes / 2));
}
