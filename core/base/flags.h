#pragma once
// Command-line flags defined in one line, the way the seed's tf.app.flags are:
//
//   COHORT_DEFINE_int(batch_size, 64, "examples per worker step");   // in any .cc file
//   COHORT_DECLARE_int(batch_size);                                   // to use it from another
//   ... FLAGS_batch_size ...                                          // a plain typed variable
//
// cohort::app::Run (core/app.h) parses the command line into these variables before main runs.
// Sources, later ones winning: the default, the COHORT_<NAME> environment variable, then the
// command line read left to right (a --flagfile's lines count where the --flagfile stands).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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

/// One defined flag. `value` points at the FLAGS_ variable.
struct Flag {
  std::string name;
  Type type;
  void* value;
  std::string default_text;
  std::string doc;
  std::string file;
  int line;
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

  /// The result of parsing: arguments that are not flags (argv[0] first), and whether --help was
  /// asked for.
  struct Parsed {
    std::vector<std::string> rest;
    bool help = false;
  };

  /// Parses `args` (args[0] is the program name) into the flag variables. `getenv` looks up the
  /// COHORT_<NAME> fallbacks (std::getenv when empty). Throws FlagError on any fault.
  Parsed parse(const std::vector<std::string>& args,
               const std::function<const char*(const char*)>& getenv = {});

  /// --help text: every flag with its type, default and doc, grouped by defining file.
  std::string help(const std::string& program) const;

  /// Sets one flag from text, as the command line would. Throws FlagError naming `source`.
  void set(const std::string& name, const std::string& text, const std::string& source);

 private:
  std::optional<std::string> suggest(const std::string& unknown) const;

  std::vector<Flag> flags_;
  std::vector<std::string> duplicates_;
};

/// Registers a flag at static-initialisation time; used by the COHORT_DEFINE_ macros.
template <typename T>
struct Registrar {
  Registrar(const char* name, T* value, const char* doc, const char* file, int line);
};

}  // namespace cohort::flags

#define COHORT_FLAGS_DEFINE_(cpp_type, name, default_value, doc)                          \
  cpp_type FLAGS_##name = (default_value);                                                \
  static const ::cohort::flags::Registrar<cpp_type> cohort_flag_registrar_##name(         \
      #name, &FLAGS_##name, doc, __FILE__, __LINE__)

#define COHORT_DEFINE_string(name, default_value, doc) \
  COHORT_FLAGS_DEFINE_(std::string, name, default_value, doc)
#define COHORT_DEFINE_int(name, default_value, doc) \
  COHORT_FLAGS_DEFINE_(std::int64_t, name, default_value, doc)
#define COHORT_DEFINE_bool(name, default_value, doc) \
  COHORT_FLAGS_DEFINE_(bool, name, default_value, doc)
#define COHORT_DEFINE_float(name, default_value, doc) \
  COHORT_FLAGS_DEFINE_(double, name, default_value, doc)

#define COHORT_DECLARE_string(name) extern std::string FLAGS_##name
#define COHORT_DECLARE_int(name) extern std::int64_t FLAGS_##name
#define COHORT_DECLARE_bool(name) extern bool FLAGS_##name
#define COHORT_DECLARE_float(name) extern double FLAGS_##name
