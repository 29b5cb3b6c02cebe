// Which copy of the kernels runs (core/nn/cpu_level.h). Built into every kernel test program, so
// each run of one under COHORT_CPU_LEVEL (tests/core/nn/cpu_levels_test.sh) first shows that the
// level asked for is the one its other tests then check against the reference paths.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/cpu_level.h"
#include "cohort/core/nn/ops/gemm.h"

using namespace cohort;

namespace {

int rank_of(std::string_view level) {
  if (level == "x86-64-v4") return 4;
  if (level == "x86-64-v3") return 3;
  if (level == "x86-64-v2") return 2;
  return 0;
}

// Sets COHORT_CPU_LEVEL for one scope, then puts back what was there.
class ScopedLevel {
 public:
  explicit ScopedLevel(const char* value) {
    if (const char* old = std::getenv("COHORT_CPU_LEVEL")) old_ = old;
    setenv("COHORT_CPU_LEVEL", value, 1);
  }
  ~ScopedLevel() {
    if (old_) setenv("COHORT_CPU_LEVEL", old_->c_str(), 1);
    else unsetenv("COHORT_CPU_LEVEL");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("the kernels in use are the level asked for, else the best the CPU and build allow") {
  INFO("kernels: " << kernel_level_summary());
  CHECK(rank_of(kernel_level()) <= rank_of(cpu_level()));
  if (const char* wanted = std::getenv("COHORT_CPU_LEVEL")) {
    CHECK(std::string(kernel_level()) == wanted);
    CHECK_NOTHROW(check_cpu_level());
  } else if (kernel_level_summary().find("built x86-64-v2 x86-64-v3 x86-64-v4") != std::string::npos) {
    CHECK(std::string(kernel_level()) == cpu_level());  // the loader chose the best copy
  }
}

TEST_CASE("COHORT_CPU_LEVEL: a bad value, or a level above the CPU's, is a clear error") {
  {
    ScopedLevel level("avx2");
    CHECK_THROWS_WITH_AS(check_cpu_level(),
                         "COHORT_CPU_LEVEL=avx2: not a level; expected x86-64-v2, x86-64-v3 or x86-64-v4",
                         InvalidArgument);
  }
  if (rank_of(cpu_level()) == 3 || rank_of(cpu_level()) == 2) {
    ScopedLevel level("x86-64-v4");
    CHECK_THROWS_WITH_AS(check_cpu_level(),
                         ("COHORT_CPU_LEVEL=x86-64-v4: this CPU supports at most " +
                          std::string(cpu_level())).c_str(),
                         InvalidArgument);
  }
}

TEST_CASE("OpenBLAS's fallback to its SSE3 kernels gives way to the kernels of the CPU's level") {
  CHECK(std::string(openblas_core_for_cpu("Prescott", "x86-64-v4")) == "SkylakeX");
  CHECK(std::string(openblas_core_for_cpu("Prescott", "x86-64-v3")) == "Haswell");
  CHECK(std::string(openblas_core_for_cpu("Prescott", "x86-64-v2")) == "Nehalem");
  CHECK(openblas_core_for_cpu("Prescott", "x86-64") == nullptr);
  CHECK(openblas_core_for_cpu("Haswell", "x86-64-v4") == nullptr);  // a choice that stands
  CHECK(openblas_core_for_cpu("Zen", "x86-64-v3") == nullptr);
  // In this process: unless the user chose the kernels, OpenBLAS's are not its fallback (it fell
  // back on a CPU newer than itself, and the process restarted with the right ones).
  const char* user_choice = std::getenv("OPENBLAS_CORETYPE");
  MESSAGE("kernels: " << kernel_level_summary());
  const bool set_by_cohort = std::getenv("COHORT_OPENBLAS_FELL_BACK_TO") != nullptr;
  if ((user_choice == nullptr || set_by_cohort) && ops_detail::openblas_follows_coretype())
    CHECK(openblas_core_for_cpu(ops_detail::openblas_core(), cpu_level()) == nullptr);
  if (user_choice != nullptr && !set_by_cohort) {
    // The user's choice stands, even OpenBLAS's fallback on a CPU that has more (the ctest
    // nn_openblas_coretype_of_the_user_stands sets OPENBLAS_CORETYPE=Prescott).
    CHECK(kernel_level_summary().find("by Cohort") == std::string::npos);
#if defined(__x86_64__)
    if (ops_detail::openblas_follows_coretype() && std::string_view(user_choice) == "Prescott")
      CHECK(std::string_view(ops_detail::openblas_core()) == "Prescott");
#endif
  }
}

TEST_CASE("kernels below the CPU's because glibc is older than 2.33 are explained in the header") {
  const char* built = "x86-64-v2 x86-64-v3 x86-64-v4";
  CHECK(cohort::kernel_selection_note("x86-64-v2", "x86-64-v4", built, "2.28") ==
        "the loader took the x86-64-v2 copy: glibc 2.28 chooses by glibc-hwcaps from 2.33 on, so the "
        "x86-64-v4 one is not used");
  CHECK(cohort::kernel_selection_note("x86-64-v2", "x86-64-v3", built, "2.31").find("glibc 2.31") != std::string::npos);
  // Nothing to explain: the CPU's level in use, a glibc that chooses, or no copy for the CPU's level.
  CHECK(cohort::kernel_selection_note("x86-64-v4", "x86-64-v4", built, "2.28").empty());
  CHECK(cohort::kernel_selection_note("x86-64-v2", "x86-64-v4", built, "2.36").empty());
  CHECK(cohort::kernel_selection_note("x86-64-v2", "x86-64-v4", built, "3.0").empty());
  CHECK(cohort::kernel_selection_note("x86-64-v4", "x86-64-v4", "x86-64-v4", "2.28").empty());
  CHECK(cohort::kernel_selection_note("x86-64-v3", "x86-64-v4", "x86-64-v3", "2.28").empty());
  CHECK(cohort::kernel_selection_note("generic", "generic", "", "2.28").empty());
  CHECK(cohort::kernel_selection_note("x86-64-v2", "x86-64-v4", built, "unknown").empty());
}
