// CheckpointManager on real files in a temp dir under the build tree: the index, pruning,
// falling back past damaged checkpoints, and crashes simulated between write and rename.

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cohort/core/io/checkpoint.h"
#include "support/skip.h"
#include "support/stderr_capture.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using cohort::Checkpoint;
using cohort::CheckpointError;
using cohort::CheckpointManager;

namespace {

// The manager makes its directory itself: these tests start without one.
struct TempDir : cohort::test::TempDir {
  explicit TempDir(const std::string& name) : cohort::test::TempDir(name, kAbsent) {}
};

using cohort::test::slurp;
using cohort::test::spit;
using cohort::test::StderrCapture;

// A checkpoint whose values tell which step wrote them.
Checkpoint at_step(std::int64_t step) {
  Checkpoint c;
  c.metadata = {{"model", "mlp"}, {"mode", "sync"}};
  const float s = static_cast<float>(step);
  c.tensors.push_back({"hidden1/kernel", {2, 3}, {s, s + 1, s + 2, s + 3, s + 4, s + 5}});
  c.tensors.push_back({"optimizer/momentum", {3}, {-s, -s, -s}});
  return c;
}

void check_is_step(const std::optional<Checkpoint>& c, std::int64_t step) {
  REQUIRE(c.has_value());
  CHECK(c->global_step() == step);
  REQUIRE(c->find("hidden1/kernel") != nullptr);
  CHECK(c->find("hidden1/kernel")->values[5] == static_cast<float>(step) + 5);
  CHECK(c->find("optimizer/momentum")->values[2] == -static_cast<float>(step));
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> temp_files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& n : files_in(dir))
    if (n.find(".tmp-") != std::string::npos) names.push_back(n);
  return names;
}

void flip_last_byte(const std::string& path) {
  std::string bytes = slurp(path);
  bytes.back() ^= 0x01;
  spit(path, bytes);
}

}  // namespace

TEST_CASE("checkpoint file names") {
  CHECK(CheckpointManager::file_name(300) == "model.ckpt-300.safetensors");
  CHECK(CheckpointManager::step_of("model.ckpt-300.safetensors") == 300);
  CHECK(CheckpointManager::step_of("model.ckpt-0.safetensors") == 0);
  CHECK_FALSE(CheckpointManager::step_of("model.ckpt-007.safetensors"));
  CHECK_FALSE(CheckpointManager::step_of("model.ckpt--1.safetensors"));
  CHECK_FALSE(CheckpointManager::step_of("model.ckpt-.safetensors"));
  CHECK_FALSE(CheckpointManager::step_of("model.ckpt-1x.safetensors"));
  CHECK_FALSE(CheckpointManager::step_of("model.ckpt-3.safetensors.tmp-12-abcdef01"));
  CHECK_FALSE(CheckpointManager::step_of("../model.ckpt-3.safetensors"));
}

TEST_CASE("an empty directory has nothing to restore") {
  TempDir dir("ckpt_manager_empty");
  CheckpointManager manager(dir / "a/b");
  CHECK(manager.directory() == dir / "a/b");
  CHECK(manager.keep_checkpoint_max() == 5);
  // Reading a directory not there yet finds nothing, and creates nothing (a mistyped path).
  CHECK_FALSE(manager.restore_latest().has_value());
  CHECK_FALSE(manager.latest_path().has_value());
  CHECK(manager.all_paths().empty());
  CHECK_FALSE(fs::exists(dir / "a"));
  manager.lock_for_writing();  // created, parents too
  CHECK(fs::is_directory(dir / "a/b"));
  CHECK_FALSE(manager.restore_latest().has_value());
  CheckpointManager saver(dir / "c/d", 0);
  saver.save(3, at_step(3));  // save() creates it too
  CHECK(saver.latest_path() == std::string(dir / "c/d/model.ckpt-3.safetensors"));
}

TEST_CASE("bad arguments") {
  TempDir dir("ckpt_manager_args");
  CHECK_THROWS_AS(CheckpointManager(dir.str(), -1), cohort::InvalidArgument);
  CheckpointManager manager(dir.str());
  CHECK_THROWS_WITH_AS(manager.save(-5, at_step(0)), doctest::Contains("negative step -5"),
                       cohort::InvalidArgument);
  fs::create_directories(dir.str());
  spit(dir / "plain_file", "x");
  CHECK_THROWS_WITH_AS(CheckpointManager(dir / "plain_file"),
                       doctest::Contains("not a directory, cannot hold checkpoints"), CheckpointError);
  CHECK_THROWS_WITH_AS(CheckpointManager(dir / "plain_file/below").lock_for_writing(),
                       doctest::Contains("cannot create the checkpoint directory"), CheckpointError);
}

TEST_CASE("one writer per directory: a second is refused while the first holds its lock") {
  TempDir dir("ckpt_manager_lock");
  {
    CheckpointManager first(dir.str());
    first.lock_for_writing();
    first.lock_for_writing();  // again: nothing changes
    CheckpointManager second(dir.str());
    CHECK_THROWS_WITH_AS(second.lock_for_writing(std::chrono::seconds(1)),
                         doctest::Contains("another job is writing checkpoints there"),
                         CheckpointError);
    // Readers need no lock: the second still restores what the first saved.
    first.save(10, at_step(10));
    REQUIRE(second.restore_latest().has_value());
    CHECK(second.restore_latest()->global_step() == 10);
  }
  // The first gone, its lock is free; the lock file is not a checkpoint and survives saves.
  CheckpointManager third(dir.str());
  third.lock_for_writing();
  third.save(20, at_step(20));
  CHECK(fs::exists(dir / "checkpoint.lock"));
  CHECK(third.all_paths().size() == 2);
}

TEST_CASE("a directory where the index goes is refused when the writer starts, not at its first save") {
  TempDir dir("ckpt_manager_index_dir");
  fs::create_directories(dir / "checkpoint");
  CheckpointManager manager(dir.str());
  CHECK_THROWS_WITH_AS(manager.lock_for_writing(),
                       doctest::Contains("checkpoint, where the index goes, is not a regular file"),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(manager.latest_path(),
                       doctest::Contains("the checkpoint index is not a regular file"),
                       CheckpointError);
}

TEST_CASE("save writes the file and the index; restore_latest reads the newest") {
  TempDir dir("ckpt_manager_save");
  CheckpointManager manager(dir.str());
  Checkpoint c = at_step(100);
  c.metadata["global_step"] = "999";  // save()'s step wins
  CHECK(manager.save(100, c) == dir / "model.ckpt-100.safetensors");
  manager.save(200, at_step(200));
  manager.save(300, at_step(300));

  CHECK(manager.latest_path() == dir / "model.ckpt-300.safetensors");
  CHECK(manager.all_paths() == std::vector<std::string>{dir / "model.ckpt-100.safetensors",
                                                        dir / "model.ckpt-200.safetensors",
                                                        dir / "model.ckpt-300.safetensors"});
  const auto index = nlohmann::json::parse(slurp(dir / "checkpoint"));
  CHECK(index["latest"] == "model.ckpt-300.safetensors");
  CHECK(index["all"] == nlohmann::json{"model.ckpt-100.safetensors", "model.ckpt-200.safetensors",
                                       "model.ckpt-300.safetensors"});
  CHECK(cohort::read_checkpoint(dir / "model.ckpt-100.safetensors").global_step() == 100);

  StderrCapture err(dir / "stderr.txt");
  const auto restored = CheckpointManager(dir.str()).restore_latest();
  CHECK(err.lines().empty());
  check_is_step(restored, 300);
  CHECK(restored->metadata.at("model") == "mlp");
  CHECK(temp_files_in(dir.path).empty());

  // Saving a step again makes it the latest, listed once.
  manager.save(200, at_step(200));
  CHECK(manager.latest_path() == dir / "model.ckpt-200.safetensors");
  CHECK(manager.all_paths().size() == 3);
  CHECK(manager.all_paths().back() == dir / "model.ckpt-200.safetensors");
}

TEST_CASE("keep_checkpoint_max prunes the oldest") {
  TempDir dir("ckpt_manager_prune");
  CheckpointManager manager(dir.str(), 2);
  for (int step = 1; step <= 5; ++step) manager.save(step, at_step(step));
  CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "model.ckpt-4.safetensors",
                                                       "model.ckpt-5.safetensors"});
  CHECK(manager.all_paths() == std::vector<std::string>{dir / "model.ckpt-4.safetensors",
                                                        dir / "model.ckpt-5.safetensors"});

  CheckpointManager keep_all(dir / "all", 0);
  for (int step = 1; step <= 7; ++step) keep_all.save(step, at_step(step));
  CHECK(keep_all.all_paths().size() == 7);
}

TEST_CASE("keep_checkpoint_every_n_hours keeps one of the pruned checkpoints every n hours, for good") {
  TempDir dir("ckpt_manager_every_n_hours");
  using std::chrono::hours, std::chrono::minutes;
  const auto now = fs::file_time_type::clock::now();
  // The files' times tell when they were written: set them as hours passing would.
  const auto written = [&](int step, fs::file_time_type when) {
    fs::last_write_time(dir / ("model.ckpt-" + std::to_string(step) + ".safetensors"), when);
  };
  CheckpointManager manager(dir.str(), 2, /*keep_checkpoint_every_n_hours=*/1.0);
  manager.save(1, at_step(1));
  written(1, now + minutes(30));  // within the first hour: pruned as usual
  manager.save(2, at_step(2));
  written(2, now + minutes(70));  // an hour after the manager began: kept
  manager.save(3, at_step(3));
  written(3, now + minutes(100));  // 30 minutes after the one kept: pruned
  manager.save(4, at_step(4));
  written(4, now + minutes(131));  // over an hour after the one kept: kept
  manager.save(5, at_step(5));
  manager.save(6, at_step(6));
  CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "model.ckpt-2.safetensors",
                                                       "model.ckpt-4.safetensors", "model.ckpt-5.safetensors",
                                                       "model.ckpt-6.safetensors"});
  CHECK(manager.all_paths() == std::vector<std::string>{dir / "model.ckpt-5.safetensors",
                                                        dir / "model.ckpt-6.safetensors"});
  CHECK(manager.kept_paths() == std::vector<std::string>{dir / "model.ckpt-2.safetensors",
                                                         dir / "model.ckpt-4.safetensors"});
  // A manager of a later run keeps them too: they are not taken back among the ones it prunes.
  CheckpointManager later(dir.str(), 2);
  later.save(7, at_step(7));
  later.save(8, at_step(8));
  CHECK(later.kept_paths().size() == 2);
  CHECK(later.all_paths() == std::vector<std::string>{dir / "model.ckpt-7.safetensors",
                                                      dir / "model.ckpt-8.safetensors"});
  CHECK(fs::exists(dir / "model.ckpt-2.safetensors"));
  // A restore falls back to them after the index's other checkpoints.
  for (int step : {7, 8}) flip_last_byte(dir / ("model.ckpt-" + std::to_string(step) + ".safetensors"));
  StderrCapture err(dir / "stderr.txt");
  check_is_step(later.restore_latest(), 4);
  CHECK_THROWS_AS(CheckpointManager(dir.str(), 2, -1.0), cohort::InvalidArgument);
}

TEST_CASE("keep_checkpoint_every_n_hours counts on across a restart, from the index") {
  TempDir dir("ckpt_manager_every_n_hours_restart");
  using std::chrono::minutes;
  const auto now = fs::file_time_type::clock::now();
  const auto written = [&](int step, fs::file_time_type when) {
    fs::last_write_time(dir / ("model.ckpt-" + std::to_string(step) + ".safetensors"), when);
  };
  {
    CheckpointManager first(dir.str(), 1, 1.0);
    first.save(1, at_step(1));
    written(1, now + minutes(70));
    first.save(2, at_step(2));  // 1 kept: the next may come at 130 minutes
  }
  // A restarted job: its manager began just now, but the index says when the next may come.
  CheckpointManager again(dir.str(), 1, 1.0);
  again.save(3, at_step(3));  // 2, written now: deleted
  written(3, now + minutes(100));
  again.save(4, at_step(4));  // 3: an hour after the manager began, but not after the one kept
  written(4, now + minutes(140));
  again.save(5, at_step(5));  // 4: kept
  CHECK(again.kept_paths() == std::vector<std::string>{dir / "model.ckpt-1.safetensors",
                                                       dir / "model.ckpt-4.safetensors"});
  CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "model.ckpt-1.safetensors",
                                                       "model.ckpt-4.safetensors", "model.ckpt-5.safetensors"});
  CHECK_THROWS_AS(CheckpointManager(dir.str(), 1, 1e-5), cohort::InvalidArgument);  // 0.036 s
}

TEST_CASE("a save that cannot read the index deletes nothing; files the index lost go by step") {
  TempDir dir("ckpt_manager_lost_index");
  CheckpointManager manager(dir.str(), 2);
  for (int step = 1; step <= 3; ++step) manager.save(step, at_step(step));
  spit(dir / "checkpoint", "{");
  {
    StderrCapture err(dir / "stderr.txt");
    manager.save(4, at_step(4));
    REQUIRE(err.lines().size() == 1);
    CHECK(err.lines()[0].find("deleting none of them this time") != std::string::npos);
  }
  fs::remove(dir / "stderr.txt");
  CHECK(manager.all_paths().size() == 3);  // 2, 3, 4: nothing deleted
  manager.save(5, at_step(5));
  CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "model.ckpt-4.safetensors",
                                                       "model.ckpt-5.safetensors"});
  // A crash between writing the index and deleting an old file leaves one the index does not
  // name: older than what it names, it goes first.
  const std::string old_file = slurp(dir / "model.ckpt-4.safetensors");
  manager.save(6, at_step(6));  // 4 deleted
  spit(dir / "model.ckpt-4.safetensors", old_file);
  manager.save(7, at_step(7));
  CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "model.ckpt-6.safetensors",
                                                       "model.ckpt-7.safetensors"});
}

TEST_CASE("restore_latest falls back past a damaged latest checkpoint, with a warning") {
  TempDir dir("ckpt_manager_fallback");
  CheckpointManager manager(dir.str());
  for (int step = 1; step <= 3; ++step) manager.save(step, at_step(step));
  const std::string latest = dir / "model.ckpt-3.safetensors";

  SUBCASE("a flipped byte") {
    flip_last_byte(latest);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 2);
    const auto lines = err.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("warning: " + latest + ": checksum mismatch") != std::string::npos);
    CHECK(lines[0].find("restoring " + dir / "model.ckpt-2.safetensors") != std::string::npos);
  }
  SUBCASE("truncated") {
    fs::resize_file(latest, fs::file_size(latest) / 2);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 2);
    const auto lines = err.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find(latest + ": ") != std::string::npos);
    CHECK(lines[0].find("truncated") != std::string::npos);
  }
  SUBCASE("missing") {
    fs::remove(latest);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 2);
    const auto lines = err.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find(latest + ": missing") != std::string::npos);
  }
  SUBCASE("two damaged") {
    flip_last_byte(latest);
    fs::resize_file(dir / "model.ckpt-2.safetensors", 4);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 1);
    CHECK(err.lines().size() == 2);
  }
  SUBCASE("a file whose global_step differs from its name") {
    fs::copy_file(dir / "model.ckpt-1.safetensors", latest, fs::copy_options::overwrite_existing);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 2);
    const auto lines = err.lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("global_step 1 does not match its file name") != std::string::npos);
  }
  SUBCASE("a corrupt index: the files in the directory, highest step first") {
    // Cut short, or holding a number beyond a double.
    for (const char* index : {"{\"latest\": ", "{\"latest\": 1e400}"}) {
      CAPTURE(index);
      spit(dir / "checkpoint", index);
      StderrCapture err(dir / "stderr.txt");
      check_is_step(manager.restore_latest(), 3);
      const auto lines = err.lines();
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].find(dir / "checkpoint" + ": checkpoint index is not valid JSON") !=
            std::string::npos);
      CHECK_THROWS_AS(manager.latest_path(), CheckpointError);
    }
  }
  SUBCASE("an index naming a file outside the directory is refused") {
    spit(dir / "checkpoint", R"({"latest": "../../etc/passwd", "all": []})");
    CHECK_THROWS_WITH_AS(manager.latest_path(), doctest::Contains("not a checkpoint file name"),
                         CheckpointError);
    StderrCapture err(dir / "stderr.txt");
    check_is_step(manager.restore_latest(), 3);
    CHECK(err.lines().size() == 1);
    // save() warns and rewrites the index from the files present.
    StderrCapture save_err(dir / "stderr2.txt");
    manager.save(4, at_step(4));
    CHECK(save_err.lines().size() == 1);
    CHECK(manager.all_paths().size() == 4);
  }
}

TEST_CASE("a checkpoint that is there but cannot be read stops the restore: no older one instead") {
  TempDir dir("ckpt_manager_unreadable");
  CheckpointManager manager(dir.str());
  for (int step = 1; step <= 2; ++step) manager.save(step, at_step(step));
  const std::string latest = dir / "model.ckpt-2.safetensors";
  fs::permissions(latest, fs::perms::none);
  fs::permissions(dir.str(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  // Root reads any file: the restore runs in a child that gives up root for nobody, whom the
  // kernel refuses; it reports through a pipe (nobody cannot write in the directory).
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const ::pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    const bool root = ::geteuid() == 0;
    if (root && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(77);
    int code = 1;
    try {
      CheckpointManager(dir.str()).restore_latest();
    } catch (const cohort::CheckpointReadError& e) {
      const std::string what = e.what();
      const ::ssize_t sent = ::write(pipe_fds[1], what.data(), what.size());
      code = sent == static_cast<::ssize_t>(what.size()) ? 0 : 3;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[4096];
  for (::ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) return cohort::test::skip("root here cannot become nobody (setuid)");
  CHECK(WEXITSTATUS(status) == 0);  // 1: restored something; 2: another error
  INFO(message);
  CHECK(message.find(latest + ": cannot open: Permission denied; not restoring an older checkpoint") == 0);
  // Readable again, it is restored as usual.
  fs::permissions(latest, fs::perms::owner_read | fs::perms::owner_write);
  check_is_step(manager.restore_latest(), 2);
}

TEST_CASE("no usable checkpoint: an error listing every file and its fault") {
  TempDir dir("ckpt_manager_none");
  CheckpointManager manager(dir.str());
  for (int step = 1; step <= 3; ++step) manager.save(step, at_step(step));
  flip_last_byte(dir / "model.ckpt-3.safetensors");
  fs::resize_file(dir / "model.ckpt-2.safetensors", 3);
  spit(dir / "model.ckpt-1.safetensors", "");
  std::string message;
  try {
    manager.restore_latest();
  } catch (const CheckpointError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("no usable checkpoint in " + dir.str()) == 0);
  CHECK(message.find(dir / "model.ckpt-3.safetensors: checksum mismatch") != std::string::npos);
  CHECK(message.find(dir / "model.ckpt-2.safetensors: truncated: 3 bytes") != std::string::npos);
  CHECK(message.find(dir / "model.ckpt-1.safetensors: truncated: 0 bytes") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("a crash between writing and renaming the checkpoint leaves the previous one in force") {
  TempDir dir("ckpt_manager_crash");
  CheckpointManager manager(dir.str());
  manager.save(1, at_step(1));
  std::string temp_seen;
  manager.set_before_rename([&](const std::string& temp) {
    temp_seen = temp;
    throw std::runtime_error("simulated crash");
  });
  CHECK_THROWS_WITH(manager.save(2, at_step(2)), "simulated crash");
  CHECK(temp_seen.rfind(dir / "model.ckpt-2.safetensors.tmp-", 0) == 0);
  CHECK(fs::exists(temp_seen));  // left behind, as a crash would
  CHECK_FALSE(fs::exists(dir / "model.ckpt-2.safetensors"));
  CHECK(manager.latest_path() == dir / "model.ckpt-1.safetensors");

  // A fresh process: restore ignores the temporary file, silently.
  StderrCapture err(dir / "stderr.txt");
  check_is_step(CheckpointManager(dir.str()).restore_latest(), 1);
  CHECK(err.lines().empty());

  // The next save removes the leftover.
  manager.set_before_rename(nullptr);
  manager.save(3, at_step(3));
  CHECK(temp_files_in(dir.path).empty());
  CHECK(manager.all_paths() == std::vector<std::string>{dir / "model.ckpt-1.safetensors",
                                                        dir / "model.ckpt-3.safetensors"});
  check_is_step(manager.restore_latest(), 3);

  // Another crash; the next job's writer removes the leftover as soon as it holds the lock
  // (a restored session's first save may be far off).
  manager.set_before_rename([](const std::string&) { throw std::runtime_error("simulated crash"); });
  CHECK_THROWS(manager.save(4, at_step(4)));
  CHECK(temp_files_in(dir.path).size() == 1);
  CheckpointManager next(dir.str());
  next.lock_for_writing();
  CHECK(temp_files_in(dir.path).empty());
}

TEST_CASE("a crash before the index is renamed: the old index holds; the orphan is adopted") {
  TempDir dir("ckpt_manager_crash_index");
  CheckpointManager manager(dir.str(), 3);
  manager.save(1, at_step(1));
  int calls = 0;
  manager.set_before_rename([&](const std::string& temp) {
    ++calls;
    if (temp.find("/checkpoint.tmp-") != std::string::npos) throw std::runtime_error("crash");
  });
  CHECK_THROWS(manager.save(2, at_step(2)));
  CHECK(calls == 2);  // the checkpoint file, then the index
  CHECK(fs::exists(dir / "model.ckpt-2.safetensors"));
  CHECK(manager.latest_path() == dir / "model.ckpt-1.safetensors");
  CHECK(temp_files_in(dir.path).size() == 1);
  check_is_step(CheckpointManager(dir.str()).restore_latest(), 1);

  manager.set_before_rename(nullptr);
  manager.save(3, at_step(3));
  manager.save(4, at_step(4));
  CHECK(temp_files_in(dir.path).empty());
  // model.ckpt-2 joined the list as older than 3, and pruning counts it.
  CHECK(manager.all_paths() == std::vector<std::string>{dir / "model.ckpt-2.safetensors",
                                                        dir / "model.ckpt-3.safetensors",
                                                        dir / "model.ckpt-4.safetensors"});
  CHECK_FALSE(fs::exists(dir / "model.ckpt-1.safetensors"));
}
