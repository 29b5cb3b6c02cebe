#include "cohort/core/io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "cohort/core/base/error.h"
#include "cohort/core/io/file.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

const std::string kIndexName = "checkpoint";
const std::string kLockName = "checkpoint.lock";
const std::string kPrefix = "model.ckpt-";
const std::string kSuffix = ".safetensors";
const std::string kTempMarker = ".tmp-";  // write_file_atomically names its files <path>.tmp-...

// A file time as the system clock's seconds since 1970, and back: the index's times outlive the
// process, whose file clock may count from elsewhere.
double seconds_of(fs::file_time_type time) {
  return std::chrono::duration<double>(
             fs::file_time_type::clock::to_sys(time).time_since_epoch())
      .count();
}
fs::file_time_type file_time_of(double seconds) {
  const std::chrono::sys_time<std::chrono::nanoseconds> sys(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds)));
  return fs::file_time_type::clock::from_sys(sys);
}

void warn(const std::string& message) {
  std::fprintf(stderr, "[%s] warning: %s\n", process_label().c_str(), message.c_str());
}

}  // namespace

CheckpointManager::CheckpointManager(std::string directory, int keep_checkpoint_max,
                                     double keep_checkpoint_every_n_hours)
    : directory_(std::move(directory)), keep_checkpoint_max_(keep_checkpoint_max) {
  if (directory_.empty()) throw InvalidArgument("CheckpointManager: the directory name is empty");
  if (keep_checkpoint_max < 0)
    throw InvalidArgument("CheckpointManager " + directory_ + ": keep_checkpoint_max " +
                          std::to_string(keep_checkpoint_max) + " is negative (0 keeps all)");
  if (!(keep_checkpoint_every_n_hours >= 0 && keep_checkpoint_every_n_hours <= 1e6))
    throw InvalidArgument("CheckpointManager " + directory_ + ": keep_checkpoint_every_n_hours " +
                          std::to_string(keep_checkpoint_every_n_hours) + " is not in [0, 1e6] (0: off)");
  keep_every_ = std::chrono::seconds(std::llround(keep_checkpoint_every_n_hours * 3600));
  if (keep_checkpoint_every_n_hours > 0 && keep_every_.count() == 0)
    throw InvalidArgument("CheckpointManager " + directory_ + ": keep_checkpoint_every_n_hours " +
                          std::to_string(keep_checkpoint_every_n_hours) + " is under a second");
  first_kept_ = fs::file_time_type::clock::now() + keep_every_;
  std::error_code ec;
  if (fs::exists(directory_, ec) && !fs::is_directory(directory_, ec))
    throw CheckpointError(directory_ + ": not a directory, cannot hold checkpoints");
}

void CheckpointManager::make_directory() const {
  std::error_code ec;
  const bool made = fs::create_directories(directory_, ec);
  if (ec) throw CheckpointError(directory_ + ": cannot create the checkpoint directory: " +
                                ec.message());
  if (made) sync_directory_entry(directory_);
  if (!fs::is_directory(directory_, ec))
    throw CheckpointError(directory_ + ": not a directory, cannot hold checkpoints");
}

void CheckpointManager::lock_for_writing(std::chrono::seconds patience) {
  if (writer_lock_) return;
  make_directory();
  const std::string path = path_of(kLockName);
  if (::access(directory_.c_str(), W_OK) != 0)
    throw CheckpointError(directory_ + ": cannot write checkpoints there: " + std::strerror(errno));
  // Found now, not at the first save after the whole run.
  std::error_code ec;
  const fs::file_status index = fs::status(index_path(), ec);
  if (fs::exists(index) && !fs::is_regular_file(index))
    throw CheckpointError(directory_ + ": cannot write checkpoints there: " + index_path() +
                          ", where the index goes, is not a regular file");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw CheckpointError(directory_ + ": cannot write checkpoints there: " + path + ": " +
                          std::strerror(errno));
  const FileLock lock = lock_exclusively(fd, path, patience);
  const int unlockable = lock == FileLock::kNotSupported ? errno : 0;
  if (lock == FileLock::kHeldElsewhere) {
    ::close(fd);
    throw CheckpointError(directory_ + ": another job is writing checkpoints there (it has held " +
                          path + " for " + std::to_string(patience.count()) +
                          " s); give each job a checkpoint directory of its own");
  }
  writer_lock_ = std::shared_ptr<const int>(new int(fd), [](const int* open) {
    ::close(*open);
    delete open;
  });
  if (unlockable != 0) {
    warn(path + ": cannot lock it (" + std::strerror(unlockable) +
         "): nothing keeps a second job from writing checkpoints here at the same time");
    return;
  }
  // Held: the temporary files here are a crash's leftovers (as large as a checkpoint each), not
  // a running writer's; gone now rather than at the first save, which a restore puts off.
  remove_temp_files();
}

std::string CheckpointManager::file_name(std::int64_t step) {
  return kPrefix + std::to_string(step) + kSuffix;
}

std::optional<std::int64_t> CheckpointManager::step_of(const std::string& name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size() - kSuffix.size();
  // Only the spelling file_name() produces: digits, no sign, no leading zero.
  if (first >= last || *first == '-' || *first == '+' || (*first == '0' && last - first > 1))
    return std::nullopt;
  std::int64_t step = 0;
  const auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last) return std::nullopt;
  return step;
}

void CheckpointManager::set_before_rename(std::function<void(const std::string&)> f) {
  before_rename_ = std::move(f);
}

std::string CheckpointManager::path_of(const std::string& name) const {
  return (fs::path(directory_) / name).string();
}

std::string CheckpointManager::index_path() const { return path_of(kIndexName); }

std::optional<CheckpointManager::Index> CheckpointManager::read_index() const {
  const std::string path = index_path();
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw CheckpointReadError(path + ": cannot stat the checkpoint index: " + ec.message());
  if (!fs::exists(status)) return std::nullopt;
  if (!fs::is_regular_file(status))
    throw CheckpointError(path + ": the checkpoint index is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": cannot open the checkpoint index");
  std::ostringstream text;
  text << in.rdbuf();
  auto fail = [&](const std::string& fault) -> CheckpointError {
    return CheckpointError(path + ": " + fault);
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number beyond a double
    throw fail(std::string("checkpoint index is not valid JSON: ") + e.what());
  }
  const auto latest = json.is_object() ? json.find("latest") : json.end();
  const auto all = json.is_object() ? json.find("all") : json.end();
  if (!json.is_object() || latest == json.end() || !latest->is_string() || all == json.end() ||
      !all->is_array())
    throw fail("checkpoint index must be {\"latest\": name, \"all\": [names]}, found " +
               json.dump().substr(0, 200));
  Index index;
  index.latest = latest->get<std::string>();
  // The names decide what save() deletes, so nothing but our own file names is accepted.
  auto check = [&](const std::string& name) {
    if (!step_of(name))
      throw fail("checkpoint index names " + quote(name) + ", not a checkpoint file name (" +
                 kPrefix + "<step>" + kSuffix + ")");
  };
  check(index.latest);
  for (const auto& name : *all) {
    if (!name.is_string()) throw fail("checkpoint index \"all\" holds " + name.dump());
    index.all.push_back(name.get<std::string>());
    check(index.all.back());
  }
  if (const auto next = json.find("next_kept"); next != json.end()) {
    if (!next->is_number()) throw fail("checkpoint index \"next_kept\" is not a time: " + next->dump());
    index.next_kept = next->get<double>();
  }
  if (const auto kept = json.find("kept"); kept != json.end()) {
    if (!kept->is_array()) throw fail("checkpoint index \"kept\" is not a list: " + kept->dump());
    for (const auto& name : *kept) {
      if (!name.is_string()) throw fail("checkpoint index \"kept\" holds " + name.dump());
      index.kept.push_back(name.get<std::string>());
      check(index.kept.back());
    }
  }
  return index;
}

void CheckpointManager::write_index(const Index& index) {
  nlohmann::ordered_json json{{"latest", index.latest}, {"all", index.all}};
  if (!index.kept.empty()) json["kept"] = index.kept;
  if (index.next_kept) json["next_kept"] = *index.next_kept;
  const std::string text = json.dump(2) + "\n";
  const std::span<const std::byte> piece = std::as_bytes(std::span(text));
  write_file_atomically(index_path(), std::span(&piece, 1), before_rename_);
}

std::vector<std::string> CheckpointManager::files_on_disk() const {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto step = step_of(name)) found.emplace_back(*step, name);
  }
  if (ec == std::errc::no_such_file_or_directory) return {};  // not made yet: nothing saved
  if (ec) throw CheckpointError(directory_ + ": cannot list the checkpoint directory: " +
                                ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [step, name] : found) names.push_back(std::move(name));
  return names;
}

void CheckpointManager::remove_temp_files() const {
  std::error_code ec;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto marker = name.find(kTempMarker);
    if (marker == std::string::npos) continue;
    const std::string target = name.substr(0, marker);
    if (target != kIndexName && !step_of(target)) continue;
    std::error_code remove_ec;
    fs::remove(it->path(), remove_ec);  // best effort: a leftover is only wasted space
  }
}

std::string CheckpointManager::save(std::int64_t step, Checkpoint checkpoint) {
  if (step < 0)
    throw InvalidArgument("CheckpointManager " + directory_ + ": cannot save negative step " +
                          std::to_string(step));
  make_directory();
  remove_temp_files();
  checkpoint.metadata["global_step"] = std::to_string(step);
  const std::string name = file_name(step);
  const std::string path = path_of(name);
  write_checkpoint(path, checkpoint, before_rename_);

  Index previous;
  bool index_read = true;
  try {
    if (auto index = read_index()) previous = std::move(*index);
  } catch (const CheckpointError& e) {
    // Which files it kept for good is not known now: none is deleted in this save.
    warn(std::string(e.what()) + "; rewriting it from the checkpoint files in the directory, "
                                 "and deleting none of them this time");
    index_read = false;
  }
  // The files still there, oldest (lowest step) first, the ones the index does not name among
  // them (a crash between writing a checkpoint and the index, or between the index and the
  // deletion of old ones, leaves such files); then this save. The ones kept for good stay apart.
  Index next{name, {}, {}, {}};
  std::set<std::string> named{name};
  const auto there = [&](const std::string& n) {
    std::error_code ec;
    return fs::exists(path_of(n), ec) || ec;  // a file that cannot be looked at is not gone
  };
  for (const auto& n : previous.kept)
    if (there(n) && named.insert(n).second) next.kept.push_back(n);
  for (const auto& n : previous.all)
    if (there(n) && named.insert(n).second) next.all.push_back(n);
  for (const auto& n : files_on_disk())
    if (named.insert(n).second) next.all.push_back(n);
  std::stable_sort(next.all.begin(), next.all.end(),
                   [](const std::string& a, const std::string& b) { return *step_of(a) < *step_of(b); });
  next.all.push_back(name);

  // When the next checkpoint to keep for good may be written: as the index says (a restarted
  // job goes on counting from the last one kept), else n hours after this manager began.
  fs::file_time_type next_kept = first_kept_;
  if (previous.next_kept)
    next_kept = file_time_of(*previous.next_kept);
  std::vector<std::string> doomed;
  const auto keep = static_cast<std::size_t>(keep_checkpoint_max_);
  if (index_read && keep > 0 && next.all.size() > keep) {
    const auto first_kept = next.all.end() - static_cast<std::ptrdiff_t>(keep);
    for (auto it = next.all.begin(); it != first_kept; ++it) {
      std::error_code ec;
      const auto written = fs::last_write_time(path_of(*it), ec);
      if (keep_every_.count() > 0 && !ec && written >= next_kept) {
        next.kept.push_back(*it);
        next_kept = written + keep_every_;
      } else {
        doomed.push_back(*it);
      }
    }
    next.all.erase(next.all.begin(), first_kept);
  }
  next.next_kept = keep_every_.count() > 0 ? std::optional<double>(seconds_of(next_kept)) : previous.next_kept;
  write_index(next);
  for (const auto& n : doomed) {
    std::error_code ec;
    fs::remove(path_of(n), ec);
    if (ec) warn(path_of(n) + ": cannot delete an old checkpoint: " + ec.message());
  }
  return path;
}

std::optional<Checkpoint> CheckpointManager::restore_latest() {
  std::vector<std::string> candidates;  // file names, in the order to try them
  std::set<std::string> seen;
  auto add = [&](const std::string& name) {
    if (seen.insert(name).second) candidates.push_back(name);
  };
  std::vector<std::string> faults;  // one line per unusable file, each naming it
  try {
    if (auto index = read_index()) {
      add(index->latest);
      for (auto it = index->all.rbegin(); it != index->all.rend(); ++it) add(*it);
    }
  } catch (const CheckpointError& e) {
    faults.push_back(e.what());
  }
  const auto on_disk = files_on_disk();
  for (auto it = on_disk.rbegin(); it != on_disk.rend(); ++it) add(*it);

  bool any_file = false;
  for (const auto& name : candidates) {
    const std::string path = path_of(name);
    std::error_code ec;
    const bool exists = fs::exists(path, ec);
    if (ec)
      throw CheckpointReadError(path + ": cannot look at it: " + ec.message() +
                                "; not restoring an older checkpoint instead, which would lose the "
                                "steps since");
    if (!exists) {
      faults.push_back(path + ": missing (named in the checkpoint index)");
      continue;
    }
    any_file = true;
    try {
      Checkpoint checkpoint = read_checkpoint(path);
      if (checkpoint.global_step() != *step_of(name)) {
        faults.push_back(path + ": its global_step " + checkpoint.metadata.at("global_step") +
                         " does not match its file name");
        continue;
      }
      for (const auto& fault : faults) warn(fault + "; restoring " + path + " instead");
      return checkpoint;
    } catch (const CheckpointReadError& e) {
      // Not known to be damaged: an older checkpoint would silently undo the steps since.
      throw CheckpointReadError(std::string(e.what()) +
                                "; not restoring an older checkpoint instead, which would lose "
                                "the steps since: mend the file system's fault and start again, "
                                "or move the file away to restore the one before it");
    } catch (const CheckpointError& e) {
      faults.push_back(e.what());
    }
  }
  if (!any_file) {
    for (const auto& fault : faults) warn(fault + "; no checkpoint to restore");
    return std::nullopt;
  }
  std::string message = "no usable checkpoint in " + directory_ + ":";
  for (std::size_t i = 0; i < faults.size(); ++i) message += (i ? "; " : " ") + faults[i];
  throw CheckpointError(message, kInputStatus);  // every file damaged: another try fares no better
}

std::optional<std::string> CheckpointManager::latest_path() const {
  const auto index = read_index();
  if (!index) return std::nullopt;
  return path_of(index->latest);
}

std::vector<std::string> CheckpointManager::kept_paths() const {
  std::vector<std::string> paths;
  if (const auto index = read_index())
    for (const auto& name : index->kept) paths.push_back(path_of(name));
  return paths;
}

std::vector<std::string> CheckpointManager::all_paths() const {
  std::vector<std::string> paths;
  if (const auto index = read_index())
    for (const auto& name : index->all) paths.push_back(path_of(name));
  return paths;
}

}  // namespace cohort
