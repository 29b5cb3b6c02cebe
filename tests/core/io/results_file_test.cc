// Results files: a path checked before a job trains, and a JSON object written whole, with the
// numbers as short as they read back and a diverged loss as null.

#include "cohort/core/io/results_file.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "cohort/core/base/error.h"
#include "support/temp_dir.h"

namespace cohort {

TEST_CASE("check_writable says which flag names a path that cannot be written, and why") {
  test::TempDir dir("results");
  CHECK_NOTHROW(check_writable(dir / "m.json", "--metrics_json"));
  test::spit(dir / "m.json", "old");
  CHECK_NOTHROW(check_writable(dir / "m.json", "--metrics_json"));  // replaced at the end
  CHECK_THROWS_WITH_AS(check_writable(dir / "no/such/m.json", "--metrics_json"),
                       ("--metrics_json=" + (dir / "no/such/m.json") + ": no directory " + (dir / "no/such")).c_str(),
                       InvalidArgument);
  std::filesystem::create_directory(dir / "sub");
  CHECK_THROWS_WITH_AS(check_writable(dir / "sub", "--predictions"),
                       ("--predictions=" + (dir / "sub") + ": is a directory").c_str(), InvalidArgument);
  // A device is written to in place: /dev/stdout for a pipeline (/dev/null here).
  CHECK_NOTHROW(check_writable("/dev/null", "--predictions"));
  CHECK_THROWS_WITH_AS(check_writable(dir / "m.json/x", "--predictions"),
                       ("--predictions=" + (dir / "m.json/x") + ": no directory " + (dir / "m.json")).c_str(),
                       InvalidArgument);
}

TEST_CASE("check_writable refuses a path that is one of the job's other files, which it would overwrite") {
  test::TempDir dir("results");
  test::spit(dir / "x.npy", "features");
  test::spit(dir / "y.npy", "labels");
  std::filesystem::create_directory(dir / "sub");
  const std::vector<std::pair<std::string, std::string>> inputs{
      {"--train", dir / "x.npy" + "," + dir / "y.npy"}, {"--predict", ""}};
  // A member of a list, named by another spelling of its path.
  CHECK_THROWS_WITH_AS(check_writable(dir / "sub/../y.npy", "--predictions", inputs),
                       ("--predictions=" + (dir / "sub/../y.npy") + ": the same file as --train=" +
                        (dir / "x.npy") + "," + (dir / "y.npy") + ", which it would overwrite")
                           .c_str(),
                       InvalidArgument);
  // Another output of the job, not there yet.
  CHECK_THROWS_WITH_AS(check_writable(dir / "p.csv", "--metrics_json", {{"--predictions", dir / "sub/../p.csv"}}),
                       ("--metrics_json=" + (dir / "p.csv") + ": the same file as --predictions=" +
                        (dir / "sub/../p.csv") + ", which it would overwrite")
                           .c_str(),
                       InvalidArgument);
  CHECK_NOTHROW(check_writable(dir / "p.csv", "--predictions", inputs));
  CHECK_NOTHROW(check_writable(dir / "x.npy.csv", "--predictions", inputs));
  // Several outputs: each against the inputs and the outputs before it; those not given pass.
  CHECK_NOTHROW(check_outputs({{"--predictions", dir / "p.csv"}, {"--metrics_json", ""}}, inputs));
  CHECK_THROWS_WITH_AS(check_outputs({{"--predictions", dir / "p.csv"}, {"--vocabulary_file", dir / "p.csv"}}, inputs),
                       ("--vocabulary_file=" + (dir / "p.csv") + ": the same file as --predictions=" +
                        (dir / "p.csv") + ", which it would overwrite")
                           .c_str(),
                       InvalidArgument);
}

TEST_CASE("write_json_object writes the fields in order, floats as short as they read back, non-finite as null") {
  test::TempDir dir("results");
  const std::string path = dir / "m.json";
  test::spit(path, "an older file, replaced");
  write_json_object(path, {{"loss", std::numeric_limits<float>::quiet_NaN()},
                           {"accuracy", 0.9828f},
                           {"mse", 0.125},
                           {"third", 1.0 / 3},
                           {"test_examples", std::int64_t{600}},
                           {"diverged", -std::numeric_limits<double>::infinity()},
                           {"model", std::string("mlp \"small\"")}});
  CHECK(test::slurp(path) ==
        "{\n"
        "  \"loss\": null,\n"
        "  \"accuracy\": 0.9828,\n"
        "  \"mse\": 0.125,\n"
        "  \"third\": 0.3333333333333333,\n"
        "  \"test_examples\": 600,\n"
        "  \"diverged\": null,\n"
        "  \"model\": \"mlp \\\"small\\\"\"\n"
        "}\n");
  CHECK_THROWS_AS(write_json_object(dir / "no/such/m.json", {{"loss", 1.0}}), Error);
  // Written to a device, not renamed over it (as root, a rename would replace /dev/null).
  write_json_object("/dev/null", {{"loss", 1.0}});
  CHECK(std::filesystem::is_character_file("/dev/null"));
  // Nothing is left behind by a write that failed, nor by one that succeeded.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
}

}  // namespace cohort
