#include "cohort/core/nn/cpu_level.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cohort/core/base/error.h"
#include "cohort/core/nn/ops/gemm.h"

// COHORT_KERNEL_BUILT (set by core/nn/CMakeLists.txt): the levels this build has copies of, or
// the -march of a one-copy build.
#ifndef COHORT_KERNEL_BUILT
#define COHORT_KERNEL_BUILT "unknown"
#endif

namespace cohort {
namespace {

constexpr std::array<std::string_view, 3> kLevels = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
constexpr const char* kVariable = "COHORT_CPU_LEVEL";
// Set in the environment of a process restarted by choose_kernels_at_load(), so that it restarts
// once at most.
constexpr const char* kRestarted = "COHORT_CPU_KERNELS_CHOSEN";
// Set, to OpenBLAS's own choice, when Cohort set OPENBLAS_CORETYPE because OpenBLAS fell back.
constexpr const char* kOpenBlasFellBackTo = "COHORT_OPENBLAS_FELL_BACK_TO";

// COHORT_CPU_LEVEL's value; nullptr when unset or empty.
const char* wanted_level() {
  const char* value = std::getenv(kVariable);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The index of `level` in kLevels, or -1.
int level_index(std::string_view level) {
  for (std::size_t i = 0; i < kLevels.size(); ++i) {
    if (kLevels[i] == level) return static_cast<int>(i);
  }
  return -1;
}

const char* level_features(std::string_view level) {
  if (level == "x86-64-v4") return "AVX-512";
  if (level == "x86-64-v3") return "AVX2+FMA";
  if (level == "x86-64-v2") return "SSE4.2";
  return "no vector extensions assumed";
}

#if defined(__linux__) && defined(__x86_64__)
// Runs as the library loads, after OpenBLAS has chosen its kernels (glibc runs a library's
// initialisers after those of the libraries it needs, and passes main's arguments to them).
// Restarts the program once, with the environment set so that the restarted process loads the
// right kernels, when:
// - COHORT_CPU_LEVEL asks for a level below the copy loaded: the loader's view of the CPU is
//   masked down to that level (anything this cannot fix is left to check_cpu_level(), which
//   reports it as an error once main() runs);
// - OpenBLAS did not recognise the CPU and fell back to its oldest kernels
//   (openblas_core_for_cpu()), OPENBLAS_CORETYPE does not already say which to use, and this
//   OpenBLAS reads it (a DYNAMIC_ARCH build, as Debian's).
void choose_kernels_at_load(int /*argc*/, char** argv, char** /*envp*/) {
  if (std::getenv(kRestarted) != nullptr) return;
  // A program started through the loader (ld.so ./program) cannot restart itself.
  char exe[4096];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (length <= 0 || std::string_view(exe, static_cast<std::size_t>(length)).find("/ld-") !=
                         std::string_view::npos)
    return;
  const int want = wanted_level() != nullptr ? level_index(wanted_level()) : -1;
  bool restart = false;
#if defined(COHORT_KERNEL_DISPATCH)
  const int have = level_index(kernel_level());
  if (want >= 0 && have >= 0 && want < have) {
    std::string tunables;
    if (const char* old = std::getenv("GLIBC_TUNABLES")) tunables = std::string(old) + ":";
    tunables += want == 0 ? "glibc.cpu.hwcaps=-AVX2,-AVX512F" : "glibc.cpu.hwcaps=-AVX512F";
    setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    setenv("OPENBLAS_CORETYPE", want == 0 ? "Nehalem" : "Haswell", 0);
    setenv("ONEDNN_MAX_CPU_ISA", want == 0 ? "SSE41" : "AVX2", 0);
    restart = true;
  }
#endif
  bool chose_openblas = false;
  if (!restart && std::getenv("OPENBLAS_CORETYPE") == nullptr &&
      ops_detail::openblas_follows_coretype()) {
    // The kernels of the CPU's level, or of the level COHORT_CPU_LEVEL caps it at.
    std::string_view level = cpu_level();
    if (want >= 0 && want < level_index(level)) level = kLevels[static_cast<std::size_t>(want)];
    const char* chosen = ops_detail::openblas_core();
    if (const char* core = openblas_core_for_cpu(chosen, level)) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      setenv(kOpenBlasFellBackTo, chosen, 1);
      restart = chose_openblas = true;
    }
  }
  if (!restart) return;
  setenv(kRestarted, "1", 1);
  execv("/proc/self/exe", argv);
  // Not restarted: check_cpu_level() says if the cap did not apply; OpenBLAS keeps its choice,
  // and nothing says otherwise.
  unsetenv(kRestarted);
  if (chose_openblas) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(kOpenBlasFellBackTo);
  }
}
__attribute__((used, section(".init_array"))) void (*const choose_kernels)(int, char**, char**) =
    &choose_kernels_at_load;
#endif

}  // namespace

const char* openblas_core_for_cpu(std::string_view openblas_core, std::string_view level) {
  // OpenBLAS's fallback for an x86-64 CPU whose model number it does not know (0.3.21 takes
  // Intel's fifth-generation Xeons for one) is its SSE3 kernels, "Prescott".
  if (openblas_core != "Prescott") return nullptr;
  if (level == "x86-64-v4") return "SkylakeX";
  if (level == "x86-64-v3") return "Haswell";
  if (level == "x86-64-v2") return "Nehalem";
  return nullptr;
}

const char* kernel_level() {
#if defined(__x86_64__)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512CD__) && \
    defined(__AVX512DQ__) && defined(__AVX512VL__)
  return "x86-64-v4";
#elif defined(__AVX2__) && defined(__FMA__) && defined(__BMI2__)
  return "x86-64-v3";
#elif defined(__SSE4_2__) && defined(__POPCNT__)
  return "x86-64-v2";
#else
  return "x86-64";
#endif
#else
  return "generic";
#endif
}

const char* cpu_level() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
  const bool v3 = v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
#else
  return "generic";
#endif
}

std::string kernel_selection_note(std::string_view kernels, std::string_view cpu, std::string_view built,
                                  std::string_view glibc) {
  const int have = level_index(kernels), can = level_index(cpu);
  if (have < 0 || can <= have || built.find(cpu) == std::string_view::npos) return "";
  int major = 0, minor = 0;
  const auto [dot, error] = std::from_chars(glibc.data(), glibc.data() + glibc.size(), major);
  if (error != std::errc() || dot == glibc.data() + glibc.size() || *dot != '.') return "";
  std::from_chars(dot + 1, glibc.data() + glibc.size(), minor);
  if (major > 2 || (major == 2 && minor >= 33)) return "";
  return "the loader took the " + std::string(kernels) + " copy: glibc " + std::string(glibc) +
         " chooses by glibc-hwcaps from 2.33 on, so the " + std::string(cpu) + " one is not used";
}

std::string kernel_level_summary() {
  std::string line = std::string(kernel_level()) + " (" + level_features(kernel_level()) + ")";
  if (const char* cap = wanted_level()) line += ", capped by " + std::string(kVariable) + "=" + cap;
#if defined(__GLIBC__)
  else if (const std::string note = kernel_selection_note(kernel_level(), cpu_level(), COHORT_KERNEL_BUILT,
                                                          gnu_get_libc_version());
           !note.empty())
    line += " (" + note + ")";
#endif
  line += std::string("; CPU ") + cpu_level() + "; built " + COHORT_KERNEL_BUILT + "; GEMM " +
          ops_detail::gemm_libraries();
  if (const char* fell_back = std::getenv(kOpenBlasFellBackTo)) {
    const std::string chosen = ops_detail::openblas_core();
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    line += chosen != fell_back
                ? std::string(" (OPENBLAS_CORETYPE set by Cohort: OpenBLAS did not know this CPU "
                              "and chose ") + fell_back + ")"
                : std::string(" (OpenBLAS did not know this CPU and ignored OPENBLAS_CORETYPE=") +
                      (coretype != nullptr ? coretype : "") + ": a build for one CPU type?)";
  }
  return line;
}

void check_cpu_level() {
  const char* wanted = wanted_level();
  if (wanted == nullptr) return;
  const std::string prefix = std::string(kVariable) + "=" + wanted + ": ";
  const int want = level_index(wanted);
  if (want < 0) {
    throw InvalidArgument(prefix + "not a level; expected x86-64-v2, x86-64-v3 or x86-64-v4");
  }
  if (want > level_index(cpu_level())) {
    throw InvalidArgument(prefix + "this CPU supports at most " + cpu_level());
  }
  if (want != level_index(kernel_level())) {
    throw InvalidArgument(prefix + "the kernels in use are " + kernel_level() + " (this build has " +
                          COHORT_KERNEL_BUILT + ")");
  }
}

}  // namespace cohort
