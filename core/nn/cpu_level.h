#pragma once
// Which copy of the CPU kernels runs. The default build compiles cohort::nn (the ops, the
// optimizers, Eigen's products) once per x86-64 instruction-set level, x86-64-v2 (SSE4.2),
// x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), and the dynamic loader loads the best copy the
// CPU supports (cmake/CohortCompile.cmake). The environment variable COHORT_CPU_LEVEL caps the
// level, for tests and comparisons:
//
//   COHORT_CPU_LEVEL=x86-64-v3 mpirun -np 4 build/bin/train    # AVX2 kernels on an AVX-512 CPU
//
// The cap is applied as the library loads, before main(): the process restarts itself once with
// the loader told to ignore the higher levels (GLIBC_TUNABLES=glibc.cpu.hwcaps=...), OpenBLAS
// told the matching core type (OPENBLAS_CORETYPE) and oneDNN the matching instruction set
// (ONEDNN_MAX_CPU_ISA), each unless set. A build with -march=native or -DCOHORT_MARCH has one
// copy, and accepts only its own level.

#include <string>
#include <string_view>

namespace cohort {

/// The level the kernels in use were compiled for: "x86-64-v2", "x86-64-v3", "x86-64-v4", or
/// on other processors "generic".
const char* kernel_level();

/// The highest level this CPU supports (the same names).
const char* cpu_level();

/// One line for run headers and benchmark tables: "x86-64-v3 (AVX2+FMA); CPU x86-64-v3; built
/// x86-64-v2 x86-64-v3 x86-64-v4; GEMM OpenBLAS Haswell, oneDNN 2.6.3 AVX2 from 1M multiply-adds".
std::string kernel_level_summary();

/// Why the loader took kernels of level `kernels` below `cpu`'s where the build has a copy for
/// it (`built`: "x86-64-v2 x86-64-v3 x86-64-v4"), when `glibc` ("2.28") is the reason: the loader
/// chooses a library's copy by its glibc-hwcaps directory from glibc 2.33 on, and an older one
/// (RHEL 8's, Ubuntu 20.04's) always loads the baseline. Empty otherwise. kernel_level_summary()
/// adds it, unless COHORT_CPU_LEVEL caps the level.
std::string kernel_selection_note(std::string_view kernels, std::string_view cpu, std::string_view built,
                                  std::string_view glibc);

/// The OpenBLAS kernels ("SkylakeX", "Haswell", "Nehalem") to use instead of `openblas_core`,
/// OpenBLAS's own choice, on a CPU of `level`; nullptr when its choice stands. OpenBLAS built with
/// DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's model number, and falls back to its
/// SSE3 kernels ("Prescott") on a CPU newer than itself. When it has, and OPENBLAS_CORETYPE is
/// unset, the program restarts itself once as the library loads with OPENBLAS_CORETYPE set to
/// this (for the level COHORT_CPU_LEVEL caps the CPU at, if set), and kernel_level_summary() says
/// so.
const char* openblas_core_for_cpu(std::string_view openblas_core, std::string_view level);

/// Checks COHORT_CPU_LEVEL against what runs: throws InvalidArgument naming the variable when its
/// value is not a level, is above what the CPU supports, or could not be applied (the kernels in
/// use are of another level). Does nothing when it is unset or empty. app::Run calls it at
/// start-up.
void check_cpu_level();

}  // namespace cohort
