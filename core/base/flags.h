#pragma once
// Command-line flags defined in one line, the way the seed's tf.app.flags are:
//
//   COHORT_DEFINE_int(batch_size, 64, "examples per worker step");   // in any .cc file
//   COHORT_DECLARE_int(batch_size);                                   // to use it from another
//   ... FLAGS_batch_size ...                                          // a plain typed variable
//
// After the doc, a definition may give properties, checked by parse():
//
//   COHORT_DEFINE_int(batch_size, 64, "examples per worker step", cohort::flags::Range{1, 1 << 20});
//   COHORT_DEFINE_string(mode, "sync", "...", cohort::flags::Choices{"sync", "async"},
//                        cohort::flags::kSameOnAllRanks);
//
// Cohort's own flags live in namespace cohort, so a program may define a flag of the same name:
// parse() then names both definitions instead of the linker failing.
//
// cohort::app::Run (core/app.h) parses the command line into these variables before main runs.
// Sources, later ones winning: the default, the COHORT_<NAME> environment variable, then the
// command line read left to right (a --flagfile's lines count where the --flagfile stands).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/base/error.h"

namespace cohort::flags {

/// A command line that cannot be accepted (unknown flag, bad value, duplicate definition).
/// cohort::app::Run reports it and exits with status 2.
class FlagError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

enum class Type { kString, kInt, kBool, kFloat };
const char* type_name(Type type);

/// A numeric flag's accepted values, bounds included (the lower one left out where
/// `min_excluded`: Range{.min = 0, .max = 10, .min_excluded = true} for a positive rate); NaN is
/// never in range.
struct Range {
  double min;
  double max;
  bool min_excluded = false;

  /// "1 to 4096", "above 0 up to 10".
  std::string to_string() const;
};

/// A string flag's accepted values: anything else is refused at parse time, naming the flag, its
/// source and the choices (and the nearest one, where a value is close to one).
struct Choices {
  Choices(std::initializer_list<const char*> list) : values(list.begin(), list.end()) {}
  std::vector<std::string> values;
};

/// A setting every rank of a job must share (the mode, the model): app::Run compares the values
/// across ranks at start-up and refuses a mismatch, naming the ranks and values.
struct SameOnAllRanks {};
inline constexpr SameOnAllRanks kSameOnAllRanks{};

/// One defined flag. `value` points at the FLAGS_ variable.
struct Flag {
  std::string name;
  Type type;
  void* value;
  std::string default_text;
  std::string doc;
  std::string file;
  int line;
  std::optional<Range> range;
  bool same_on_all_ranks = false;
  std::vector<std::string> choices = {};  ///< a string flag's accepted values; empty: any
};

/// A flag's current value as text, in the form the command line takes.
std::string value_text(const Flag& flag);

/// The global registry's flags `names` as "--name" and value_text(): for SessionOptions::settings,
/// the flags that decide what a model's parameters mean (how the data are prepared). Throws
/// InvalidArgument for a name no flag has.
std::map<std::string, std::string> flag_values(std::initializer_list<const char*> names);

/// The largest --flagfile read, and the most items a list flag (e.g. "256,128") may hold.
inline constexpr std::size_t kMaxFlagfileBytes = 1 << 20;
inline constexpr std::size_t kMaxListItems = 64;

/// The items of a comma-separated list flag (--`name`), none for an empty text; throws FlagError
/// for an empty item ("256,,128", "256,") and beyond kMaxListItems.
std::vector<std::string> split_list(const std::string& name, const std::string& text);
/// The same list as positive integers, each at most `max`, at least one; throws FlagError naming
/// --`name` and the bad item.
std::vector<std::int64_t> parse_size_list(const std::string& name, const std::string& text,
                                          std::int64_t max);

/// A flag that some of a program's settings leave unread: whether this run reads it, and where
/// it is read ("in ssp mode", "with --checkpoint_dir").
struct Scope {
  const char* flag;
  bool read;
  const char* only;
};

/// The flags known to a program. The global registry is the only process-wide mutable state in
/// Cohort's libraries; it is filled during static initialisation and read by app::Run.
/// Not thread-safe: define flags at namespace scope, parse once from the main thread.
class Registry {
 public:
  static Registry& global();

  /// Adds a flag. A second flag of the same name is remembered and reported by parse().
  void add(Flag flag);
  const std::vector<Flag>& flags() const { return flags_; }
  const Flag* find(const std::string& name) const;

  /// The result of parsing: arguments that are not flags (argv[0] first), and whether --help or
  /// --version was asked for.
  struct Parsed {
    std::vector<std::string> rest;
    bool help = false;
    bool version = false;
  };

  /// Parses `args` (args[0] is the program name) into the flag variables. `getenv` looks up the
  /// COHORT_<NAME> fallbacks (std::getenv when empty). Throws FlagError on any fault.
  Parsed parse(const std::vector<std::string>& args,
               const std::function<const char*(const char*)>& getenv = {});

  /// Whether the last parse() took the flag's value from the command line or the environment,
  /// rather than leaving its default (gflags' !is_default): a program may refuse a flag its other
  /// settings ignore.
  bool given(const std::string& name) const { return given_.contains(name); }

  /// A warning for each flag of `scopes` given to this run (given()) that it does not read:
  /// "warning: --staleness is read only in ssp mode: this run (RUN) ignores it", the parenthesis
  /// where `run` is not empty. A setting given to no effect, in silence, is mistaken for one that
  /// works (a site's COHORT_<NAME> included). For the one process that speaks for the job.
  std::vector<std::string> unread(std::span<const Scope> scopes, const std::string& run = "") const;

  /// Warnings for the environment variables among `names` that look meant for a flag of this
  /// program and are not one: COHORT_<X> where X is a near miss of a flag's name
  /// (COHORT_MODLE for --model). Such a variable would be ignored in silence.
  std::vector<std::string> misspelt_environment(const std::vector<std::string>& names) const;

  /// --help text: every flag with its type, default and doc, grouped by defining file.
  std::string help(const std::string& program) const;

  /// Sets one flag from text, as the command line would. Throws FlagError naming `source`.
  void set(const std::string& name, const std::string& text, const std::string& source);

 private:
  std::optional<std::string> suggest(const std::string& unknown) const;

  std::vector<Flag> flags_;
  std::vector<std::string> duplicates_;
  std::set<std::string> given_;
};

inline void apply(Flag& flag, Range range) { flag.range = range; }
inline void apply(Flag& flag, Choices choices) { flag.choices = std::move(choices.values); }
inline void apply(Flag& flag, SameOnAllRanks) { flag.same_on_all_ranks = true; }

/// Registers a flag at static-initialisation time; used by the COHORT_DEFINE_ macros.
template <typename T>
struct Registrar {
  template <typename... Properties>
  Registrar(const char* name, T* value, const char* doc, const char* file, int line,
            Properties... properties) {
    Flag flag = make(name, value, doc, file, line);
    (apply(flag, properties), ...);
    Registry::global().add(std::move(flag));
  }
  static Flag make(const char* name, T* value, const char* doc, const char* file, int line);
};

}  // namespace cohort::flags

#define COHORT_FLAGS_DEFINE_(cpp_type, name, default_value, doc, ...)                     \
  cpp_type FLAGS_##name = (default_value);                                                \
  static const ::cohort::flags::Registrar<cpp_type> cohort_flag_registrar_##name(         \
      #name, &FLAGS_##name, doc, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)

#define COHORT_DEFINE_string(name, default_value, doc, ...) \
  COHORT_FLAGS_DEFINE_(std::string, name, default_value, doc __VA_OPT__(, ) __VA_ARGS__)
#define COHORT_DEFINE_int(name, default_value, doc, ...) \
  COHORT_FLAGS_DEFINE_(std::int64_t, name, default_value, doc __VA_OPT__(, ) __VA_ARGS__)
#define COHORT_DEFINE_bool(name, default_value, doc, ...) \
  COHORT_FLAGS_DEFINE_(bool, name, default_value, doc __VA_OPT__(, ) __VA_ARGS__)
#define COHORT_DEFINE_float(name, default_value, doc, ...) \
  COHORT_FLAGS_DEFINE_(double, name, default_value, doc __VA_OPT__(, ) __VA_ARGS__)

#define COHORT_DECLARE_string(name) extern std::string FLAGS_##name
#define COHORT_DECLARE_int(name) extern std::int64_t FLAGS_##name
#define COHORT_DECLARE_bool(name) extern bool FLAGS_##name
#define COHORT_DECLARE_float(name) extern double FLAGS_##name
