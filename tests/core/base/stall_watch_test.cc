// StallWatch: a phase that outlasts its deadline ends the process with one line; one that ends
// in time, or a watch of timeout zero, does nothing. Each case runs in a child process.
#include "cohort/core/base/stall_watch.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "cohort/core/base/error.h"

namespace {

using namespace std::chrono_literals;

struct Outcome {
  int status = -1;     // the exit status, or -1 when killed by a signal
  std::string stderr_text;
};

// Runs `body` in a child process whose stderr goes to a file; the child exits 0 after it.
Outcome in_child(const std::function<void()>& body) {
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
  ::waitpid(pid, &wstatus, 0);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, text.str()};
}

}  // namespace

TEST_CASE("a phase that outlasts its deadline ends the process, naming the phase and the step") {
  const Outcome o = in_child([] {
    cohort::set_process_label("worker:1 rank 2");
    const cohort::StallWatch watch(300ms, "the allreduce", 41);
    std::this_thread::sleep_for(5s);
  });
  CHECK(o.status == 1);
  CHECK(o.stderr_text ==
        "[worker:1 rank 2] error: no progress for 0 s in the allreduce (global step 41): a peer "
        "has stalled or been lost; ending the job\n");
}

TEST_CASE("a phase that ends in time, a watch of timeout zero, and nested watches do nothing") {
  const Outcome o = in_child([] {
    for (int i = 0; i < 3; ++i) {
      const cohort::StallWatch outer(400ms, "outer");
      {
        const cohort::StallWatch inner(300ms, "inner");  // replaces the outer deadline
        std::this_thread::sleep_for(100ms);
      }
      const cohort::StallWatch never(0ms, "never");
      std::this_thread::sleep_for(100ms);
    }
    std::this_thread::sleep_for(700ms);  // nothing armed: nothing fires
  });
  CHECK(o.status == 0);
  CHECK(o.stderr_text.empty());
}

TEST_CASE("the outer deadline holds again once an inner watch is gone") {
  const Outcome o = in_child([] {
    const cohort::StallWatch outer(600ms, "the outer phase");
    { const cohort::StallWatch inner(10s, "the inner phase"); }
    std::this_thread::sleep_for(5s);
  });
  CHECK(o.status == 1);
  CHECK(o.stderr_text.find("in the outer phase: a peer") != std::string::npos);
}
