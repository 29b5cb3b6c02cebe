#include "cohort/core/base/flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <boost/program_options.hpp>

namespace cohort::flags {
namespace po = boost::program_options;

const char* type_name(Type type) {
  switch (type) {
    case Type::kString: return "string";
    case Type::kInt: return "int";
    case Type::kBool: return "bool";
    case Type::kFloat: return "float";
  }
  return "?";
}

namespace {

template <typename T> constexpr Type type_of();
template <> constexpr Type type_of<std::string>() { return Type::kString; }
template <> constexpr Type type_of<std::int64_t>() { return Type::kInt; }
template <> constexpr Type type_of<bool>() { return Type::kBool; }
template <> constexpr Type type_of<double>() { return Type::kFloat; }

template <typename T>
std::string to_text(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) return value;
  else if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else {
    // Shortest exact form: "0.1000004" stays itself (a stream's six digits would make it 0.1).
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
  }
}

std::optional<bool> parse_bool(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  return std::nullopt;
}

// Edits from a to b, a swap of two neighbours counting as one (MODLE is one from MODEL).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The candidate nearest to `text` and its distance; of those as near, the one closest in length.
template <typename Candidates, typename Name>
std::pair<const std::string*, std::size_t> nearest(const std::string& text, const Candidates& candidates,
                                                   Name name) {
  const std::string* best = nullptr;
  std::size_t best_distance = 0, best_gap = 0;
  for (const auto& candidate : candidates) {
    const std::string& n = name(candidate);
    const std::size_t d = edit_distance(text, n);
    const std::size_t gap = n.size() > text.size() ? n.size() - text.size() : text.size() - n.size();
    if (!best || d < best_distance || (d == best_distance && gap < best_gap))
      best = &n, best_distance = d, best_gap = gap;
  }
  return {best, best_distance};
}

// Where each token read from a flag file came from ("--flagfile=F line N"), for the messages
// about it; a token given twice keeps its first place.
using Origins = std::map<std::string, std::string>;

// Reads a flag file: one --name=value per line, blank lines and # comments ignored. Only a
// regular file of at most kMaxFlagfileBytes.
std::vector<std::string> read_flagfile(const std::string& path, Origins* origins) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status))
    throw FlagError("--flagfile=" + path + ": no such file");
  if (!std::filesystem::is_regular_file(status))
    throw FlagError("--flagfile=" + path + ": not a regular file");
  if (std::filesystem::file_size(path, error) > kMaxFlagfileBytes || error)
    throw FlagError("--flagfile=" + path + ": larger than " + std::to_string(kMaxFlagfileBytes) +
                    " bytes");
  std::ifstream in(path);
  if (!in) throw FlagError("--flagfile=" + path + ": cannot open the file");
  std::vector<std::string> tokens;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    std::string token = line.substr(first, last - first + 1);
    if (token.rfind("--", 0) != 0)
      throw FlagError("--flagfile=" + path + " line " + std::to_string(number) +
                      ": expected --name=value, got " + quote(token));
    if (origins) origins->emplace(token, "--flagfile=" + path + " line " + std::to_string(number));
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Replaces every --flagfile=F (or --flagfile F) by the tokens of F, recursively.
std::vector<std::string> expand_flagfiles(const std::vector<std::string>& args, Origins* origins,
                                          int depth = 0) {
  if (depth > 8) throw FlagError("--flagfile: files include each other more than 8 deep");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i].rfind("--flagfile=", 0) == 0) {
      path = args[i].substr(11);
    } else if (args[i] == "--flagfile") {
      if (i + 1 == args.size()) throw FlagError("--flagfile needs a file name");
      path = args[++i];
    } else {
      out.push_back(args[i]);
      continue;
    }
    for (auto& token : expand_flagfiles(read_flagfile(path, origins), origins, depth + 1))
      out.push_back(std::move(token));
  }
  return out;
}

std::string env_name(const std::string& flag) {
  std::string name = "COHORT_";
  for (char c : flag) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// The value as a number, for the range check.
double numeric_value(const Flag& flag) {
  if (flag.type == Type::kInt) return static_cast<double>(*static_cast<const std::int64_t*>(flag.value));
  return *static_cast<const double*>(flag.value);
}

// `text` without one leading + (from_chars reads a - but not a +); "+-5" keeps its +.
std::string_view unsigned_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

// The choice nearest to `text`: the same but for case, or within a third of its letters.
std::optional<std::string> nearest_choice(const std::string& text, const std::vector<std::string>& choices) {
  const auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  std::vector<std::string> lowered;
  for (const std::string& choice : choices) lowered.push_back(lower(choice));
  const auto [best, distance] = nearest(lower(text), lowered, [](const std::string& c) -> const std::string& { return c; });
  if (best && distance <= std::max<std::size_t>(1, text.size() / 3))
    return choices[static_cast<std::size_t>(best - lowered.data())];
  return std::nullopt;
}

// Where a flag's value came from, for the messages.
enum class Source { kDefault, kEnvironment, kCommandLine };

// Range{} and Choices{} of a flag's value. From COHORT_<NAME>, the message names the variable;
// a default out of its own range is the program's fault, and is said so.
void check_value(const Flag& flag, Source source) {
  const auto refuse = [&](const std::string& why) {
    switch (source) {
      case Source::kEnvironment:
        return FlagError(env_name(flag.name) + "=" + value_text(flag) + " (the environment's --" +
                         flag.name + "): " + why);
      case Source::kDefault:
        return FlagError("--" + flag.name + ": the program's default, " + value_text(flag) +
                         ", is refused: " + why +
                         " (its definition is at fault; a value given replaces it)");
      case Source::kCommandLine:
        break;
    }
    return FlagError("--" + flag.name + "=" + value_text(flag) + ": " + why);
  };
  if (flag.range && (flag.type == Type::kInt || flag.type == Type::kFloat)) {
    const double v = numeric_value(flag);
    const bool above_min = flag.range->min_excluded ? v > flag.range->min : v >= flag.range->min;
    if (!(above_min && v <= flag.range->max))  // NaN fails both
      throw refuse("out of range, expected " + flag.range->to_string());
  }
  if (!flag.choices.empty() && flag.type == Type::kString) {
    const std::string& text = *static_cast<const std::string*>(flag.value);
    if (std::find(flag.choices.begin(), flag.choices.end(), text) != flag.choices.end()) return;
    std::string list;
    for (const std::string& choice : flag.choices)
      list += (list.empty() ? "" : ", ") + (choice.empty() ? std::string("\"\"") : choice);
    const auto near = nearest_choice(text, flag.choices);
    throw refuse("expected one of " + list + (near ? " (did you mean " + *near + "?)" : ""));
  }
}

}  // namespace

std::string Range::to_string() const {
  return min_excluded ? "above " + to_text(min) + " up to " + to_text(max) : to_text(min) + " to " + to_text(max);
}

std::vector<std::string> split_list(const std::string& name, const std::string& text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  const auto empty_item = [&] {
    return FlagError("invalid value '" + text + "' for --" + name + ": an empty item");
  };
  if (text.back() == ',') throw empty_item();  // getline yields no empty last item
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw empty_item();
    if (items.size() == kMaxListItems)
      throw FlagError("invalid value for --" + name + ": more than " +
                      std::to_string(kMaxListItems) + " items");
    items.push_back(std::move(item));
  }
  return items;
}

std::vector<std::int64_t> parse_size_list(const std::string& name, const std::string& text,
                                          std::int64_t max) {
  std::vector<std::int64_t> sizes;
  for (const std::string& item : split_list(name, text)) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v <= 0 || v > max)
      throw FlagError("invalid value '" + text + "' for --" + name + ": item '" + item +
                      "' is not a whole number from 1 to " + std::to_string(max));
    sizes.push_back(v);
  }
  if (sizes.empty()) throw FlagError("invalid value '" + text + "' for --" + name + ": no items");
  return sizes;
}

template <typename T>
Flag Registrar<T>::make(const char* name, T* value, const char* doc, const char* file, int line) {
  return Flag{name, type_of<T>(), value, to_text(*value), doc, file, line, std::nullopt, false};
}
template struct Registrar<std::string>;
template struct Registrar<std::int64_t>;
template struct Registrar<bool>;
template struct Registrar<double>;

Registry& Registry::global() {
  static Registry registry;
  return registry;
}

void Registry::add(Flag flag) {
  if (const Flag* earlier = find(flag.name)) {
    duplicates_.push_back("flag --" + flag.name + " is defined twice: at " + earlier->file + ":" +
                          std::to_string(earlier->line) + " and at " + flag.file + ":" +
                          std::to_string(flag.line));
    return;
  }
  flags_.push_back(std::move(flag));
}

const Flag* Registry::find(const std::string& name) const {
  for (const Flag& flag : flags_)
    if (flag.name == name) return &flag;
  return nullptr;
}

std::optional<std::string> Registry::suggest(const std::string& unknown) const {
  const auto [best, distance] = nearest(unknown, flags_, [](const Flag& f) -> const std::string& { return f.name; });
  if (best && distance <= std::max<std::size_t>(2, unknown.size() / 3)) return *best;
  return std::nullopt;
}

std::vector<std::string> Registry::misspelt_environment(const std::vector<std::string>& names) const {
  std::vector<std::string> warnings;
  for (const std::string& name : names) {
    if (name.rfind("COHORT_", 0) != 0 || name.size() == 7) continue;
    std::string flag_name;
    for (const char c : name.substr(7))
      flag_name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (find(flag_name)) continue;
    const auto [best, distance] = nearest(flag_name, flags_, [](const Flag& f) -> const std::string& { return f.name; });
    // Closer than suggest()'s bar: other programs' and tools' COHORT_ variables are left alone.
    if (best && distance <= std::max<std::size_t>(1, flag_name.size() / 4))
      warnings.push_back("environment variable " + name + " is not a flag of this program (did you mean " +
                         env_name(*best) + ", for --" + *best + "?); it is ignored");
  }
  return warnings;
}

std::vector<std::string> Registry::unread(std::span<const Scope> scopes, const std::string& run) const {
  std::vector<std::string> warnings;
  for (const Scope& scope : scopes)
    if (!scope.read && given(scope.flag))
      warnings.push_back("warning: --" + std::string(scope.flag) + " is read only " + scope.only +
                         ": this run" + (run.empty() ? "" : " (" + run + ")") + " ignores it");
  return warnings;
}

std::string value_text(const Flag& flag) {
  switch (flag.type) {
    case Type::kString: return *static_cast<const std::string*>(flag.value);
    case Type::kInt: return to_text(*static_cast<const std::int64_t*>(flag.value));
    case Type::kBool: return to_text(*static_cast<const bool*>(flag.value));
    case Type::kFloat: return to_text(*static_cast<const double*>(flag.value));
  }
  return {};
}

std::map<std::string, std::string> flag_values(std::initializer_list<const char*> names) {
  std::map<std::string, std::string> values;
  for (const char* name : names) {
    const Flag* flag = Registry::global().find(name);
    if (!flag) throw InvalidArgument(std::string("flag_values: no flag --") + name);
    values.emplace(std::string("--") + name, value_text(*flag));
  }
  return values;
}

void Registry::set(const std::string& name, const std::string& text, const std::string& source) {
  const Flag* flag = find(name);
  if (!flag) throw FlagError("unknown flag --" + name);
  auto bad = [&](const char* expected) {
    return FlagError("invalid value '" + text + "' for " + source + ": expected " + expected);
  };
  switch (flag->type) {
    case Type::kString:
      *static_cast<std::string*>(flag->value) = text;
      return;
    case Type::kBool: {
      const auto b = parse_bool(text);
      if (!b) throw bad("a bool (true or false)");
      *static_cast<bool*>(flag->value) = *b;
      return;
    }
    case Type::kInt: {
      // As gflags and absl read them: a leading + and hexadecimal 0x... are numbers too.
      std::string_view digits = unsigned_plus(text);
      const bool negative = digits.starts_with('-');
      if (negative) digits.remove_prefix(1);
      const bool hex = digits.starts_with("0x") || digits.starts_with("0X");
      if (hex) digits.remove_prefix(2);
      std::uint64_t magnitude = 0;
      const auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, hex ? 16 : 10);
      const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
          magnitude > limit)
        throw bad("an int (64-bit integer)");
      *static_cast<std::int64_t*>(flag->value) =
          negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
      return;
    }
    case Type::kFloat: {
      double v = 0;
      const std::string_view number = unsigned_plus(text);
      const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
      if (number.empty() || ec != std::errc() || end != number.data() + number.size())
        throw bad("a float (a number such as 0.05 or 1e-3)");
      *static_cast<double*>(flag->value) = v;
      return;
    }
  }
}

Registry::Parsed Registry::parse(const std::vector<std::string>& args,
                                 const std::function<const char*(const char*)>& getenv) {
  if (!duplicates_.empty()) throw FlagError(duplicates_.front());
  Parsed parsed;
  parsed.rest.push_back(args.empty() ? std::string("program") : args[0]);

  // Environment fallbacks come first so that the command line overrides them; a bad one counts
  // only where the command line does not (the batch scripts export COHORT_* to every rank).
  std::map<std::string, std::string> environment_errors;  // by flag
  std::set<std::string> from_environment, from_command_line;
  for (const Flag& flag : flags_) {
    const std::string var = env_name(flag.name);
    const char* text = getenv ? getenv(var.c_str()) : std::getenv(var.c_str());
    if (!text) continue;
    try {
      set(flag.name, text, "environment variable " + var);
      from_environment.insert(flag.name);
    } catch (const FlagError& e) {
      environment_errors.emplace(flag.name, e.what());
    }
  }

  po::options_description description;
  description.add_options()("help,h", "print the flags and exit");
  // absl's spellings of the same (every flag is listed either way).
  description.add_options()("helpfull", "print the flags and exit");
  description.add_options()("helpshort", "print the flags and exit");
  description.add_options()("version", "print Cohort's version and exit");
  for (const Flag& flag : flags_) {
    description.add_options()(flag.name.c_str(), po::value<std::string>(), flag.doc.c_str());
  }

  Origins origins;
  // COHORT_FLAGFILE=F, as --flagfile=F before the command line's flags (which override it).
  std::vector<std::string> tokens;
  if (const char* file = getenv ? getenv("COHORT_FLAGFILE") : std::getenv("COHORT_FLAGFILE");
      file != nullptr && *file != '\0') {
    try {
      tokens = expand_flagfiles({std::string("--flagfile=") + file}, &origins);
    } catch (const FlagError& e) {
      throw FlagError(std::string("environment variable COHORT_FLAGFILE: ") + e.what());
    }
  }
  for (std::string& token : expand_flagfiles(
           std::vector<std::string>(args.begin() + (args.empty() ? 0 : 1), args.end()), &origins))
    tokens.push_back(std::move(token));
  // A message about a token from a flag file names the file and line (unless the same token was
  // also typed on the command line: then it has no one place).
  for (const std::string& arg : args) origins.erase(arg);
  const auto from = [&](const std::string& token, const FlagError& error) {
    const auto found = origins.find(token);
    return found == origins.end() ? error
                                  : FlagError(std::string(error.what()) + " (" + found->second + ")");
  };
  // Before Boost sees them:
  // - a bare boolean flag never takes the next argument as its value (gflags' rule); Boost would;
  // - nor does any other flag take a next argument that is itself a flag (--checkpoint_dir
  //   --train_steps=20 would name a directory "--train_steps=20");
  // - "--name=" sets an empty string, as in absl (Boost refuses it);
  // - a flag without a name ("--=5"), which Boost passes on as an argument, is refused.
  const auto keep_origin = [&](const std::string& original, const std::string& token) {
    if (const auto found = origins.find(original); found != origins.end() && token != original)
      origins.emplace(token, found->second);
  };
  std::vector<std::string> given = std::move(tokens);
  tokens.clear();
  for (std::size_t i = 0; i < given.size(); ++i) {
    const std::string original = given[i];
    try {
      std::string& token = given[i];
      if (token == "--") {
        tokens.insert(tokens.end(), given.begin() + static_cast<std::ptrdiff_t>(i), given.end());
        break;
      }
      if (token.rfind("--=", 0) == 0)
        throw FlagError("a flag without a name: " + quote(token) + " (flags are --name=value)");
      if (token.rfind("--", 0) != 0) {
        tokens.push_back(std::move(token));
        continue;
      }
      const std::size_t equals = token.find('=');
      const Flag* flag = find(token.substr(2, equals == std::string::npos ? std::string::npos : equals - 2));
      if (equals == token.size() - 1) {  // "--name="
        token.pop_back();
        if (flag && flag->type == Type::kBool)
          throw FlagError(token + "= has no value (a bool flag: --" + flag->name + ", --no" +
                          flag->name + " or " + token + "=true|false)");
        const Flag* negated = token.rfind("--no", 0) == 0 ? find(token.substr(4)) : nullptr;
        if (!flag && negated && negated->type == Type::kBool)
          throw FlagError(token + "= has an empty value: " + token + " takes none (write " + token +
                          " or --" + negated->name + "=true|false)");
        keep_origin(original, token);
        tokens.push_back(std::move(token));
        if (flag) tokens.emplace_back();  // the empty value
        continue;
      }
      if (equals == std::string::npos && flag) {
        if (flag->type == Type::kBool) {
          token += "=true";
        } else if (i + 1 < given.size() && given[i + 1].rfind("--", 0) == 0) {
          throw FlagError(token + " has no value: the next argument, " + quote(given[i + 1]) +
                          ", is a flag (write " + token + "=VALUE)");
        } else if (i + 1 == given.size()) {
          throw FlagError(token + " has no value (write " + token + "=VALUE)");
        }
      }
      keep_origin(original, token);
      tokens.push_back(std::move(token));
    } catch (const FlagError& e) {
      throw from(original, e);
    }
  }
  po::parsed_options options(&description);
  try {
    options = po::command_line_parser(tokens)
                  .options(description)
                  .style(po::command_line_style::unix_style & ~po::command_line_style::allow_guessing)
                  .allow_unregistered()
                  .run();
  } catch (const po::error& e) {
    throw FlagError(e.what());
  }

  std::map<std::string, std::string> last_token;  // the token that set each flag, by name
  for (const po::option& option : options.options) {
    if (option.position_key >= 0 || option.string_key.empty()) {
      for (const auto& v : option.value) parsed.rest.push_back(v);
      continue;
    }
    if (option.string_key == "help" || option.string_key == "helpfull" ||
        option.string_key == "helpshort") {
      parsed.help = true;
      continue;
    }
    if (option.string_key == "version") {
      parsed.version = true;
      continue;
    }
    if (option.unregistered) {
      std::string name = option.string_key;
      const std::string token = option.original_tokens.empty() ? "--" + name : option.original_tokens.front();
      if (name.rfind("no", 0) == 0) {
        const Flag* negated = find(name.substr(2));
        if (negated && negated->type == Type::kBool && option.value.empty()) {
          *static_cast<bool*>(negated->value) = false;
          from_command_line.insert(negated->name);
          continue;
        }
      }
      if (token.rfind("--", 0) != 0 && token.rfind("-", 0) == 0) {
        // One dash: Boost reads -batch_size=32 as the short option -b; name what was typed.
        name = token.substr(1, token.find('=') - 1);
        std::string message = "unknown flag " + token.substr(0, token.find('='));
        if (find(name)) message += " (flags take two dashes: --" + name + ")";
        else if (const auto guess = suggest(name)) message += " (did you mean --" + *guess + "?)";
        throw from(token, FlagError(message));
      }
      std::string message = "unknown flag --" + name;
      if (const auto guess = suggest(name)) message += " (did you mean --" + *guess + "?)";
      throw from(token, FlagError(message));
    }
    const std::string text = option.value.empty() ? std::string() : option.value.front();
    const std::string token =
        option.original_tokens.empty() ? std::string() : option.original_tokens.front();
    try {
      set(option.string_key, text, "--" + option.string_key);
    } catch (const FlagError& e) {
      throw from(token, e);
    }
    from_command_line.insert(option.string_key);
    last_token[option.string_key] = token;
  }
  for (const auto& [name, error] : environment_errors)
    if (!from_command_line.contains(name)) throw FlagError(error);
  for (const Flag& flag : flags_) {
    const bool command_line = from_command_line.contains(flag.name);
    try {
      check_value(flag, command_line                           ? Source::kCommandLine
                        : from_environment.contains(flag.name) ? Source::kEnvironment
                                                               : Source::kDefault);
    } catch (const FlagError& e) {
      if (!command_line) throw;
      throw from(last_token[flag.name], e);
    }
  }
  given_ = std::move(from_command_line);
  given_.insert(from_environment.begin(), from_environment.end());
  return parsed;
}

std::string Registry::help(const std::string& program) const {
  std::map<std::string, std::vector<const Flag*>> by_file;
  for (const Flag& flag : flags_) by_file[flag.file].push_back(&flag);
  std::ostringstream out;
  out << "Usage: " << program << " [--flag=value ...] [--flagfile=FILE]\n"
      << "Every flag can also be set by the environment variable COHORT_<NAME>, and\n"
      << "COHORT_FLAGFILE=FILE reads FILE before the command line (which overrides both).\n"
      << "--version prints Cohort's version.\n";
  for (auto& [file, list] : by_file) {
    std::sort(list.begin(), list.end(), [](const Flag* a, const Flag* b) { return a->name < b->name; });
    out << "\nFlags from " << file << ":\n";
    for (const Flag* flag : list) {
      out << "  --" << flag->name << " (" << type_name(flag->type) << ", default ";
      if (flag->type == Type::kString) out << '"' << flag->default_text << '"';
      else out << flag->default_text;
      if (flag->range) out << ", " << flag->range->to_string();
      if (!flag->choices.empty()) {
        out << ", one of";
        for (const std::string& choice : flag->choices) out << ' ' << (choice.empty() ? "\"\"" : choice);
      }
      if (flag->same_on_all_ranks) out << ", same on all ranks";
      out << ")\n      " << flag->doc << "\n";
    }
  }
  return out.str();
}

}  // namespace cohort::flags
