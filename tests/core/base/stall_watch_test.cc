// StallWatch: a wait that outlasts the stall timeout ends the process with one line; one that
// ends in time, or any while the timeout is zero, does nothing; time stopped does not count.
// Each case runs in a child process.
#include "cohort/core/base/stall_watch.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/base/error.h"
#include "cohort/core/base/wait.h"

namespace {

using namespace std::chrono_literals;

struct Outcome {
  int status = -1;     // the exit status, or -1 when killed by a signal
  std::string stderr_text;
};

// Runs `body` in a child process whose stderr goes to a file; the child exits 0 after it. With
// `continue_after`, the child is sent SIGCONT that long after it stops itself.
Outcome in_child(const std::function<void()>& body,
                 std::chrono::milliseconds continue_after = std::chrono::milliseconds(0)) {
  char path[] = "/tmp/stall_watch_test_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fd, 2);
    body();
    std::_Exit(0);
  }
  int wstatus = 0;
  if (continue_after.count() > 0) {
    ::waitpid(pid, &wstatus, WUNTRACED);  // stopped
    std::this_thread::sleep_for(continue_after);
    ::kill(pid, SIGCONT);
  }
  ::waitpid(pid, &wstatus, 0);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, text.str()};
}

}  // namespace

TEST_CASE("a wait that outlasts the stall timeout ends the process, naming the wait and the step") {
  const Outcome o = in_child([] {
    cohort::set_process_label("worker:1 rank 2");
    cohort::StallWatch::set_timeout(1s);
    const cohort::StallWatch watch("the allreduce", 41);
    std::this_thread::sleep_for(5s);
  });
  CHECK(o.status == 1);
  CHECK(o.stderr_text ==
        "[worker:1 rank 2] error: no progress for 1 s in the allreduce (global step 41): a peer "
        "has stalled or been lost; ending the job\n");
}

TEST_CASE("a long wait is named in a warning, again at each interval, before the timeout ends it") {
  const Outcome o = in_child([] {
    cohort::set_process_label("worker:0 rank 1");
    cohort::StallWatch::set_timeout(5000ms);
    cohort::StallWatch::set_warnings(1000ms, 2000ms);
    const cohort::StallWatch watch("the allreduce", 7);
    std::this_thread::sleep_for(8s);
  });
  CHECK(o.status == 1);
  // At 1 s and 3 s (the watching thread looks five times a second: a slow machine may say a
  // second more, or less left); the deadline at 5 s.
  std::vector<std::string> lines;
  std::istringstream text(o.stderr_text);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  REQUIRE(lines.size() == 3);
  const std::string warning = "[worker:0 rank 1] warning: no progress for ";
  const std::string named = " s in the allreduce (global step 7): a peer may have stalled; the job ends in ";
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(lines[i]);
    CHECK(lines[i].rfind(warning, 0) == 0);
    CHECK(lines[i].find(named) != std::string::npos);
    CHECK(lines[i].ends_with(" s unless it moves (the stall timeout)"));
  }
  CHECK(lines[2] ==
        "[worker:0 rank 1] error: no progress for 5 s in the allreduce (global step 7): a peer "
        "has stalled or been lost; ending the job");
  // A wait that ends before the first warning says nothing.
  const Outcome quiet = in_child([] {
    cohort::StallWatch::set_timeout(10s);
    cohort::StallWatch::set_warnings(2000ms, 2000ms);
    { const cohort::StallWatch watch("the allreduce", 7); std::this_thread::sleep_for(300ms); }
    std::this_thread::sleep_for(2500ms);
  });
  CHECK(quiet.status == 0);
  CHECK(quiet.stderr_text.empty());
  // A polled wait with a deadline of its own inside the watch: its warnings alone (the watch's
  // deadline, further off, would mislead).
  const Outcome polled = in_child([] {
    cohort::StallWatch::set_timeout(10s);
    cohort::StallWatch::set_warnings(300ms, 600ms);
    const cohort::StallWatch watch("the step", 3);
    try {
      cohort::wait_until([] { return false; }, 1500ms, [] { return std::string("the chief"); });
    } catch (const cohort::Error&) {
    }
  });
  CHECK(polled.status == 0);
  CHECK(polled.stderr_text.find("waiting") != std::string::npos);
  CHECK(polled.stderr_text.find("no progress") == std::string::npos);
  CHECK_THROWS_AS(cohort::StallWatch::set_warnings(0ms, 1s), cohort::InvalidArgument);
}

TEST_CASE("waits that end in time, a timeout of zero, and nested watches do nothing") {
  const Outcome o = in_child([] {
    const cohort::StallWatch unarmed("never: no timeout yet");
    cohort::StallWatch::set_timeout(2000ms);  // ten times the longest watch: a busy machine's margin
    for (int i = 0; i < 3; ++i) {
      const cohort::StallWatch outer("outer");
      {
        const cohort::StallWatch inner("inner");
        std::this_thread::sleep_for(100ms);
      }
      std::this_thread::sleep_for(100ms);
    }
    cohort::StallWatch::set_timeout(0ms);
    const cohort::StallWatch never("never");
    std::this_thread::sleep_for(700ms);
  });
  CHECK(o.status == 0);
  CHECK(o.stderr_text.empty());
}

TEST_CASE("the outer deadline holds again once an inner watch is gone") {
  const Outcome o = in_child([] {
    cohort::StallWatch::set_timeout(600ms);
    const cohort::StallWatch outer("the outer wait");
    { const cohort::StallWatch inner("the inner wait"); }
    std::this_thread::sleep_for(5s);
  });
  CHECK(o.status == 1);
  CHECK(o.stderr_text.find("in the outer wait: a peer") != std::string::npos);
}

TEST_CASE("time spent stopped (a suspended job) does not count") {
  const Outcome o = in_child([] {
    cohort::StallWatch::set_timeout(1500ms);
    const cohort::StallWatch watch("a wait that is suspended");
    std::this_thread::sleep_for(300ms);
    ::kill(::getpid(), SIGSTOP);  // the parent continues it 3 s later
    std::this_thread::sleep_for(600ms);
  }, /*continue_after=*/3s);
  CHECK(o.status == 0);
  CHECK(o.stderr_text.empty());
}
