// Crash safety against a real kill -9: checkpoint_writer_cli saves checkpoints as fast as it can
// and is killed with SIGKILL after a random delay, 20 times; after every kill, restore_latest()
// must return the index's latest checkpoint, complete and with the values that step wrote.

#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "cohort/core/io/checkpoint.h"
#include "support/temp_dir.h"

extern char** environ;

namespace fs = std::filesystem;
using cohort::Checkpoint;
using cohort::CheckpointManager;

namespace {

using cohort::test::TempDir;

// The same function as checkpoint_writer_cli.cc's.
float expected_value(std::int64_t step, int tensor, std::int64_t i) {
  return static_cast<float>((step * 7919 + tensor * 104729 + i * 31) % 1000003) * 0.5f;
}

// Empty when `c` holds exactly what the writer saves at its global step, else what differs.
std::string verify(const Checkpoint& c) {
  const std::int64_t step = c.global_step();
  const cohort::Shape shapes[] = {{256, 512}, {512}, {256, 512}};
  const char* names[] = {"hidden1/kernel", "hidden1/bias", "optimizer/momentum/hidden1/kernel"};
  if (c.tensors.size() != 3) return std::to_string(c.tensors.size()) + " tensors";
  for (int t = 0; t < 3; ++t) {
    const auto& tensor = c.tensors[static_cast<std::size_t>(t)];
    if (tensor.name != names[t] || tensor.shape != shapes[t]) return "tensor " + tensor.name;
    for (std::size_t i = 0; i < tensor.values.size(); ++i)
      if (tensor.values[i] != expected_value(step, t, static_cast<std::int64_t>(i)))
        return tensor.name + "[" + std::to_string(i) + "]";
  }
  return "";
}

pid_t spawn_writer(const fs::path& dir) {
  std::string program = COHORT_CHECKPOINT_WRITER_CLI;
  std::string arg = dir.string();
  char* argv[] = {program.data(), arg.data(), nullptr};
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv, environ) == 0);
  return pid;
}

// Kills `pid` with SIGKILL and reaps it; false if it had already ended on its own (a failure).
bool kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

int temp_files_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("kill -9 at random points never leaves an unusable latest checkpoint") {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  TempDir dir("ckpt_kill");
  const unsigned seed = std::random_device{}();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);

  // A first run until its first checkpoint is indexed, so every later restore has one to find.
  // How long that takes (start-up, restore, one save) sets the delays: up to 3x that, at least
  // 150 ms, so that most writers save something on a slow machine too.
  int first_save_ms = 0;
  {
    const auto spawned = Clock::now();
    const pid_t pid = spawn_writer(dir.path);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!fs::exists(dir.path / "checkpoint") && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    first_save_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - spawned).count());
    CHECK(kill_and_reap(pid));
    REQUIRE(fs::exists(dir.path / "checkpoint"));
  }
  std::uniform_int_distribution<int> delay_ms(5, std::max(150, 3 * first_save_ms));

  constexpr int kKills = 20;
  int corrupt = 0, not_latest = 0, killed_mid_write = 0;
  std::int64_t last_step = 0;
  std::string first_fault;
  for (int round = 0; round < kKills; ++round) {
    const pid_t pid = spawn_writer(dir.path);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    CHECK_MESSAGE(kill_and_reap(pid), "the writer ended before it was killed (round " << round << ")");
    killed_mid_write += temp_files_in(dir.path) > 0;

    CheckpointManager manager(dir.path.string(), 3);
    try {
      const auto restored = manager.restore_latest();
      const std::string fault = restored ? verify(*restored) : "nothing restored";
      if (!fault.empty()) {
        ++corrupt;
        if (first_fault.empty()) first_fault = fault;
        continue;
      }
      const std::int64_t step = restored->global_step();
      // No fallback: what the index names as latest is intact.
      not_latest += manager.latest_path() != (dir.path / CheckpointManager::file_name(step)).string();
      CHECK(step >= last_step);  // a restart continues from the newest, never goes back
      last_step = step;
    } catch (const cohort::CheckpointError& e) {
      ++corrupt;
      if (first_fault.empty()) first_fault = e.what();
    }
  }
  CHECK_MESSAGE(corrupt == 0, "first fault: " << first_fault);
  CHECK(not_latest == 0);
  CHECK(last_step > 1);  // the writers made progress between kills

  // The next save removes what the kills left behind.
  CheckpointManager manager(dir.path.string(), 3);
  const auto restored = manager.restore_latest();
  REQUIRE(restored.has_value());
  manager.save(last_step + 1, *restored);
  CHECK(temp_files_in(dir.path) == 0);

  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  MESSAGE(kKills << " kills: " << corrupt << " corrupt, " << not_latest << " fallbacks, "
                 << killed_mid_write << " with a temporary file left, last step "
                 << last_step << ", first save after " << first_save_ms << " ms, " << seconds
                 << " s");
}
