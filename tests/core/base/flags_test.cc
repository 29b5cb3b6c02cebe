#include "cohort/core/base/flags.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <map>

using cohort::flags::Flag;
using cohort::flags::FlagError;
using cohort::flags::Registry;
using cohort::flags::Type;

namespace {

// A registry of its own per test, with the four flag types.
struct Fixture {
  std::string data_dir = "/data";
  std::int64_t batch_size = 64;
  bool shuffle = true;
  double learning_rate = 0.05;
  std::map<std::string, std::string> env;
  Registry registry;

  Fixture() {
    registry.add(Flag{"data_dir", Type::kString, &data_dir, "/data", "where the data is", "a.cc", 1, {}, false});
    registry.add(Flag{"batch_size", Type::kInt, &batch_size, "64", "examples per step", "a.cc", 2, {}, false});
    registry.add(Flag{"shuffle", Type::kBool, &shuffle, "true", "shuffle each epoch", "b.cc", 3, {}, false});
    registry.add(Flag{"learning_rate", Type::kFloat, &learning_rate, "0.05", "step size", "b.cc", 4, {}, false});
  }

  Registry::Parsed parse(std::vector<std::string> args) {
    args.insert(args.begin(), "prog");
    return registry.parse(args, [this](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  }

  std::string error(std::vector<std::string> args) {
    try {
      parse(std::move(args));
    } catch (const FlagError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

}  // namespace

TEST_CASE("flags take --name=value and --name value, and leave the rest") {
  Fixture f;
  const auto parsed = f.parse({"--batch_size=128", "input.txt", "--learning_rate", "0.1",
                               "--data_dir=/tmp/x"});
  CHECK(f.batch_size == 128);
  CHECK(f.learning_rate == doctest::Approx(0.1));
  CHECK(f.data_dir == "/tmp/x");
  REQUIRE(parsed.rest.size() == 2);
  CHECK(parsed.rest[0] == "prog");
  CHECK(parsed.rest[1] == "input.txt");
  CHECK_FALSE(parsed.help);
}

TEST_CASE("boolean flags: --name, --noname, --name=false") {
  Fixture f;
  f.parse({"--noshuffle"});
  CHECK_FALSE(f.shuffle);
  f.parse({"--shuffle"});
  CHECK(f.shuffle);
  f.parse({"--shuffle=false"});
  CHECK_FALSE(f.shuffle);
  // A bool never swallows the next argument.
  const auto parsed = f.parse({"--shuffle", "file"});
  CHECK(f.shuffle);
  CHECK(parsed.rest.size() == 2);
}

TEST_CASE("the last value given wins") {
  Fixture f;
  f.parse({"--batch_size=1", "--batch_size=2"});
  CHECK(f.batch_size == 2);
}

TEST_CASE("given() tells the flags the command line or the environment set from those left at their defaults") {
  Fixture f;
  f.env["COHORT_SHUFFLE"] = "false";
  f.parse({"--batch_size=64", "x"});
  CHECK(f.registry.given("batch_size"));   // given, even at its default value
  CHECK(f.registry.given("shuffle"));      // from the environment
  CHECK_FALSE(f.registry.given("data_dir"));
  CHECK_FALSE(f.registry.given("learning_rate"));
  f.env.clear();
  f.parse({"--data_dir=/other"});
  CHECK(f.registry.given("data_dir"));     // each parse starts afresh
  CHECK_FALSE(f.registry.given("batch_size"));
}

TEST_CASE("unread() warns of the flags given to a run that does not read them") {
  Fixture f;
  f.env["COHORT_SHUFFLE"] = "true";
  f.parse({"--batch_size=64"});
  const cohort::flags::Scope scopes[] = {{"batch_size", false, "in sync mode"},
                                 {"shuffle", false, "with --data_dir"},
                                 {"learning_rate", false, "by sgd"},   // not given: no word
                                 {"data_dir", true, "always"}};
  const std::vector<std::string> warnings = f.registry.unread(scopes, "--mode=async");
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "warning: --batch_size is read only in sync mode: this run (--mode=async) ignores it");
  CHECK(warnings[1] == "warning: --shuffle is read only with --data_dir: this run (--mode=async) ignores it");
  CHECK(f.registry.unread(scopes).back() == "warning: --shuffle is read only with --data_dir: this run ignores it");
}

TEST_CASE("unknown flags are refused with a suggestion") {
  Fixture f;
  CHECK(f.error({"--lerning_rate=0.1"}) ==
        "unknown flag --lerning_rate (did you mean --learning_rate?)");
  CHECK(f.error({"--zzzzzzzzzzzz"}) == "unknown flag --zzzzzzzzzzzz");
  // Prefixes are not guessed: --batch is not --batch_size.
  CHECK(f.error({"--batch=3"}).rfind("unknown flag --batch", 0) == 0);
  // One dash: named as typed, not as Boost's short option (-b).
  CHECK(f.error({"-batch_size=32"}) ==
        "unknown flag -batch_size (flags take two dashes: --batch_size)");
  CHECK(f.error({"-lerning_rate"}) ==
        "unknown flag -lerning_rate (did you mean --learning_rate?)");
  CHECK(f.error({"--=5"}) == "a flag without a name: '--=5' (flags are --name=value)");
}

TEST_CASE("numbers as gflags and absl read them: a leading +, hexadecimal ints") {
  Fixture f;
  f.parse({"--batch_size=+32", "--learning_rate=+0.5"});
  CHECK(f.batch_size == 32);
  CHECK(f.learning_rate == 0.5);
  f.parse({"--batch_size=0x10"});
  CHECK(f.batch_size == 16);
  f.parse({"--batch_size=-0X1f"});
  CHECK(f.batch_size == -31);
  f.parse({"--batch_size=-9223372036854775808"});
  CHECK(f.batch_size == std::numeric_limits<std::int64_t>::min());
  f.parse({"--batch_size=9223372036854775807"});
  CHECK(f.batch_size == std::numeric_limits<std::int64_t>::max());
  for (const char* bad : {"9223372036854775808", "-9223372036854775809", "0x", "++3", "+-3", "+",
                          "0x-1", "1e3", " 5"}) {
    CAPTURE(bad);
    CHECK(f.error({std::string("--batch_size=") + bad}).find("expected an int") != std::string::npos);
  }
  CHECK(f.error({"--learning_rate=++1"}).find("expected a float") != std::string::npos);
}

TEST_CASE("bad values name the flag, the value and the expected type") {
  Fixture f;
  CHECK(f.error({"--batch_size=12x"}) ==
        "invalid value '12x' for --batch_size: expected an int (64-bit integer)");
  CHECK(f.error({"--learning_rate=fast"}) ==
        "invalid value 'fast' for --learning_rate: expected a float (a number such as 0.05 or 1e-3)");
  CHECK(f.error({"--shuffle=maybe"}) ==
        "invalid value 'maybe' for --shuffle: expected a bool (true or false)");
  CHECK(f.error({"--batch_size=99999999999999999999"}).find("--batch_size") != std::string::npos);
}

TEST_CASE("a flag defined twice is an error naming both places") {
  Fixture f;
  std::int64_t other = 0;
  f.registry.add(Flag{"batch_size", Type::kInt, &other, "0", "again", "c.cc", 9, {}, false});
  CHECK(f.error({}) == "flag --batch_size is defined twice: at a.cc:2 and at c.cc:9");
}

TEST_CASE("COHORT_FLAGFILE is read before the command line, which overrides it") {
  Fixture f;
  const std::string path = "flags_test_env_flagfile.txt";
  std::ofstream(path) << "--batch_size=16\n--learning_rate=0.5\n";
  f.env["COHORT_FLAGFILE"] = path;
  f.env["COHORT_BATCH_SIZE"] = "32";
  f.parse({"--learning_rate=0.25"});
  CHECK(f.batch_size == 16);
  CHECK(f.learning_rate == doctest::Approx(0.25));
  f.env["COHORT_FLAGFILE"] = "";  // set but empty: as unset
  f.parse({});
  CHECK(f.batch_size == 32);
  f.env["COHORT_FLAGFILE"] = "does_not_exist.txt";
  CHECK(f.error({}) == "environment variable COHORT_FLAGFILE: --flagfile=does_not_exist.txt: no such file");
  std::remove(path.c_str());
}

TEST_CASE("environment fallback COHORT_<NAME>, overridden by the command line") {
  Fixture f;
  f.env["COHORT_BATCH_SIZE"] = "32";
  f.env["COHORT_SHUFFLE"] = "false";
  f.parse({});
  CHECK(f.batch_size == 32);
  CHECK_FALSE(f.shuffle);
  f.parse({"--batch_size=16"});
  CHECK(f.batch_size == 16);
  f.env["COHORT_LEARNING_RATE"] = "abc";
  CHECK(f.error({}) == "invalid value 'abc' for environment variable COHORT_LEARNING_RATE: "
                       "expected a float (a number such as 0.05 or 1e-3)");
  // ... unless the command line sets the flag: then the environment's value plays no part.
  f.parse({"--learning_rate=0.5"});
  CHECK(f.learning_rate == 0.5);
}

TEST_CASE("a flag's value is never the next flag; --name= is the empty string") {
  Fixture f;
  CHECK(f.error({"--data_dir", "--batch_size=20"}) ==
        "--data_dir has no value: the next argument, '--batch_size=20', is a flag (write "
        "--data_dir=VALUE)");
  CHECK(f.error({"--batch_size", "--shuffle"}).find("--batch_size has no value") == 0);
  CHECK(f.error({"--batch_size"}) == "--batch_size has no value (write --batch_size=VALUE)");
  f.parse({"--data_dir="});
  CHECK(f.data_dir.empty());
  f.parse({"--data_dir=/x", "--batch_size", "-3"});  // a negative number is a value, not a flag
  CHECK(f.batch_size == -3);
  CHECK(f.error({"--batch_size="}) == "invalid value '' for --batch_size: expected an int (64-bit integer)");
  CHECK(f.error({"--shuffle="}) == "--shuffle= has no value (a bool flag: --shuffle, --noshuffle or --shuffle=true|false)");
  CHECK(f.error({"--data_dri="}) == "unknown flag --data_dri (did you mean --data_dir?)");
  CHECK(f.error({"--noshuffle="}) == "--noshuffle= has an empty value: --noshuffle takes none (write --noshuffle or --shuffle=true|false)");
}

TEST_CASE("--help, -h and absl's --helpfull and --helpshort all ask for the help") {
  Fixture f;
  for (const char* spelling : {"--help", "-h", "--helpfull", "--helpshort"}) {
    CAPTURE(spelling);
    CHECK(f.parse({spelling}).help);
  }
  CHECK_FALSE(f.parse({}).help);
}

TEST_CASE("--flagfile reads --name=value lines with comments, in command-line order") {
  Fixture f;
  const std::string path = "flags_test_flagfile.txt";
  {
    std::ofstream out(path);
    out << "# a comment\n\n--batch_size=256\n  --noshuffle  \n--learning_rate=0.5\n";
  }
  f.parse({"--flagfile=" + path, "--learning_rate=0.25"});
  CHECK(f.batch_size == 256);
  CHECK_FALSE(f.shuffle);
  CHECK(f.learning_rate == doctest::Approx(0.25));
  f.parse({"--learning_rate=0.25", "--flagfile", path});
  CHECK(f.learning_rate == doctest::Approx(0.5));
  CHECK(f.error({"--flagfile=does_not_exist.txt"}) == "--flagfile=does_not_exist.txt: no such file");
  std::remove(path.c_str());
}

TEST_CASE("a bad line of a flag file is named by file and line") {
  Fixture f;
  const std::string path = "flags_test_bad_flagfile.txt";
  {
    std::ofstream out(path);
    out << "# settings\n--batch_size=256\n--learning_rate=fast\n";
  }
  const std::string where = " (--flagfile=" + path + " line ";
  CHECK(f.error({"--flagfile=" + path}) ==
        "invalid value 'fast' for --learning_rate: expected a float (a number such as 0.05 or "
        "1e-3)" + where + "3)");
  {
    std::ofstream out(path);
    out << "--lerning_rate=1\n";
  }
  CHECK(f.error({"--flagfile=" + path}) ==
        "unknown flag --lerning_rate (did you mean --learning_rate?)" + where + "1)");
  {
    std::ofstream out(path);
    out << "\n--shuffle=\n";
  }
  CHECK(f.error({"--flagfile=" + path}).ends_with(where + "2)"));
  const_cast<Flag*>(f.registry.find("batch_size"))->range = cohort::flags::Range{1, 4096};
  {
    std::ofstream out(path);
    out << "--batch_size=0\n";
  }
  CHECK(f.error({"--flagfile=" + path}) ==
        "--batch_size=0: out of range, expected 1 to 4096" + where + "1)");
  // The same value typed on the command line is not the file's, nor is one both typed and read.
  CHECK(f.error({"--batch_size=0"}) == "--batch_size=0: out of range, expected 1 to 4096");
  CHECK(f.error({"--batch_size=0", "--flagfile=" + path}) ==
        "--batch_size=0: out of range, expected 1 to 4096");
  {
    std::ofstream out(path);
    out << "--batch_size=8\n--data_dir\n";
  }
  CHECK(f.error({"--flagfile=" + path}) ==
        "--data_dir has no value (write --data_dir=VALUE) (" + where.substr(2) + "2)");
  std::remove(path.c_str());
}

TEST_CASE("--flagfile takes only a regular file of bounded size") {
  Fixture f;
  CHECK(f.error({"--flagfile=."}) == "--flagfile=.: not a regular file");
  const std::string path = "flags_test_big_flagfile.txt";
  {
    std::ofstream out(path);
    out << std::string(cohort::flags::kMaxFlagfileBytes + 1, '#');
  }
  CHECK(f.error({"--flagfile=" + path}).find("larger than") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a string flag outside its choices is refused, from any source, with the nearest") {
  Fixture f;
  const_cast<Flag*>(f.registry.find("data_dir"))->choices = {"/data", "/scratch", ""};
  f.parse({"--data_dir=/scratch"});
  CHECK(f.data_dir == "/scratch");
  f.parse({"--data_dir="});
  CHECK(f.data_dir.empty());
  CHECK(f.error({"--data_dir=/Scratch"}) ==
        "--data_dir=/Scratch: expected one of /data, /scratch, \"\" (did you mean /scratch?)");
  CHECK(f.error({"--data_dir=/home/me"}) == "--data_dir=/home/me: expected one of /data, /scratch, \"\"");
  f.env["COHORT_DATA_DIR"] = "/dat";
  CHECK(f.error({}) == "COHORT_DATA_DIR=/dat (the environment's --data_dir): expected one of /data, "
                       "/scratch, \"\" (did you mean /data?)");
  f.parse({"--data_dir=/data"});  // the command line wins over a bad environment value
  f.env.clear();
  CHECK(f.registry.help("prog").find("--data_dir (string, default \"/data\", one of /data /scratch \"\")") !=
        std::string::npos);
}

TEST_CASE("an environment variable that looks meant for a flag and is not one is warned of") {
  Fixture f;
  const auto warnings = f.registry.misspelt_environment(
      {"COHORT_BATCH_SIZ", "COHORT_BATCH_SIZE", "COHORT_LAUNCHER", "COHORT_", "PATH", "COHORT_SHUFLE"});
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == "environment variable COHORT_BATCH_SIZ is not a flag of this program (did you "
                       "mean COHORT_BATCH_SIZE, for --batch_size?); it is ignored");
  CHECK(warnings[1].find("COHORT_SHUFLE is not a flag of this program (did you mean COHORT_SHUFFLE,") !=
        std::string::npos);
}

TEST_CASE("--version asks for the version") {
  Fixture f;
  CHECK(f.parse({"--version"}).version);
  CHECK_FALSE(f.parse({}).version);
}

TEST_CASE("a numeric flag outside its range is refused, from any source") {
  Fixture f;
  Flag* batch = const_cast<Flag*>(f.registry.find("batch_size"));
  batch->range = cohort::flags::Range{1, 4096};
  const_cast<Flag*>(f.registry.find("learning_rate"))->range = cohort::flags::Range{0, 10};
  f.parse({"--batch_size=4096"});
  CHECK(f.batch_size == 4096);
  CHECK(f.error({"--batch_size=0"}) == "--batch_size=0: out of range, expected 1 to 4096");
  CHECK(f.error({"--batch_size=-5"}) == "--batch_size=-5: out of range, expected 1 to 4096");
  // A refused value stays in the variable (the program is about to exit): reset it first.
  CHECK(f.error({"--batch_size=1", "--learning_rate=nan"}).find("--learning_rate=nan: out of range") == 0);
  CHECK(f.error({"--batch_size=1", "--learning_rate=1e300"}).find("out of range, expected 0 to 10") !=
        std::string::npos);
  // A positive rate: its lower bound left out.
  const_cast<Flag*>(f.registry.find("learning_rate"))->range = cohort::flags::Range{.min = 0, .max = 10, .min_excluded = true};
  CHECK(f.error({"--batch_size=1", "--learning_rate=0"}) ==
        "--learning_rate=0: out of range, expected above 0 up to 10");
  f.parse({"--batch_size=1", "--learning_rate=1e-30"});
  CHECK(f.registry.help("prog").find("above 0 up to 10") != std::string::npos);
  const_cast<Flag*>(f.registry.find("learning_rate"))->range = cohort::flags::Range{0, 10};
  f.env["COHORT_BATCH_SIZE"] = "100000";
  CHECK(f.error({}) == "COHORT_BATCH_SIZE=100000 (the environment's --batch_size): out of range, "
                       "expected 1 to 4096");
  f.parse({"--batch_size=8", "--learning_rate=1"});  // the command line wins over a bad environment value
  CHECK(f.batch_size == 8);
  // Floats are shown exactly: 1.0000001 is not "1".
  CHECK(f.error({"--batch_size=1", "--learning_rate=10.0000001"}) ==
        "--learning_rate=10.0000001: out of range, expected 0 to 10");
  // A default outside its own range is the program's fault: said so, not as if it was given.
  Fixture g;
  const_cast<Flag*>(g.registry.find("batch_size"))->range = cohort::flags::Range{100, 4096};
  CHECK(g.error({}) == "--batch_size: the program's default, 64, is refused: out of range, expected "
                       "100 to 4096 (its definition is at fault; a value given replaces it)");
  g.parse({"--batch_size=128"});
  CHECK(g.batch_size == 128);
}

TEST_CASE("list flags: positive whole numbers, bounded in value and count") {
  using cohort::flags::parse_size_list;
  CHECK(parse_size_list("hidden", "256,128", 1 << 20) == std::vector<std::int64_t>{256, 128});
  auto error = [](const std::string& text) {
    try {
      parse_size_list("hidden", text, 1000);
    } catch (const FlagError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error("256,x") == "invalid value '256,x' for --hidden: item 'x' is not a whole number "
                          "from 1 to 1000");
  CHECK(error("0").find("item '0'") != std::string::npos);
  CHECK(error("1001").find("item '1001'") != std::string::npos);
  CHECK(error("12abc").find("item '12abc'") != std::string::npos);
  CHECK(error("").find("no items") != std::string::npos);
  for (const std::string text : {"256,,128", "256,128,", ",256"})
    CHECK(error(text) == "invalid value '" + text + "' for --hidden: an empty item");
  std::string many = "1";
  for (int i = 0; i < 64; ++i) many += ",1";
  CHECK(error(many).find("more than 64 items") != std::string::npos);
}

TEST_CASE("--help lists every flag with type, default and doc, grouped by file") {
  Fixture f;
  CHECK(f.parse({"--help"}).help);
  const std::string help = f.registry.help("prog");
  CHECK(help.find("Flags from a.cc:") != std::string::npos);
  CHECK(help.find("Flags from b.cc:") != std::string::npos);
  CHECK(help.find("--batch_size (int, default 64)") != std::string::npos);
  CHECK(help.find("--data_dir (string, default \"/data\")") != std::string::npos);
  CHECK(help.find("--shuffle (bool, default true)") != std::string::npos);
  CHECK(help.find("--learning_rate (float, default 0.05)") != std::string::npos);
  CHECK(help.find("examples per step") != std::string::npos);
  CHECK(help.find("Flags from a.cc:") < help.find("Flags from b.cc:"));
}

// The macros, as a user writes them.
COHORT_DEFINE_int(test_steps, 7, "steps", cohort::flags::Range{0, 100}, cohort::flags::kSameOnAllRanks);
COHORT_DEFINE_string(test_name, "x", "name");
COHORT_DEFINE_bool(test_verbose, false, "verbose");
COHORT_DEFINE_float(test_rate, 0.5, "rate");

TEST_CASE("COHORT_DEFINE_* register typed FLAGS_ variables in the global registry") {
  static_assert(std::is_same_v<decltype(FLAGS_test_steps), std::int64_t>);
  static_assert(std::is_same_v<decltype(FLAGS_test_rate), double>);
  const Flag* flag = Registry::global().find("test_steps");
  REQUIRE(flag != nullptr);
  CHECK(flag->type == Type::kInt);
  CHECK(flag->default_text == "7");
  CHECK(flag->file.find("flags_test.cc") != std::string::npos);
  REQUIRE(flag->range.has_value());
  CHECK(flag->range->max == 100);
  CHECK(flag->same_on_all_ranks);
  CHECK_FALSE(Registry::global().find("test_rate")->range.has_value());
  Registry::global().parse({"prog", "--test_steps=9", "--test_verbose", "--test_name=y"}, {});
  CHECK(FLAGS_test_steps == 9);
  CHECK(FLAGS_test_verbose);
  CHECK(FLAGS_test_name == "y");
  CHECK(FLAGS_test_rate == doctest::Approx(0.5));
}
