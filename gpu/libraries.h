#pragma once
// cuBLAS and cuDNN are loaded when first used, not linked: a program built against a CUDA build
// of Cohort starts, and trains on the CPU, on a machine where neither is installed, and the CMake
// package and pkg-config file do not hand them to its link line. gpu/libraries.cc defines the
// library functions gpu/ calls; each finds the real one in the loaded library on its first call.

#include <string>

#include "cohort/gpu/error.h"

namespace cohort::gpu {

/// The file name loaded for `library` (kCublas or kCudnn), with the major version Cohort was
/// built with: "libcublas.so.13", "libcudnn.so.9".
std::string library_file(Library library);

/// Loads `library` (kCublas or kCudnn) unless it is loaded: first by its name (LD_LIBRARY_PATH,
/// the system's library paths), then from the directory it was found in at build time. Throws
/// cohort::Error naming the file and the loader's reason when neither works. Thread-safe.
void load_library(Library library);

}  // namespace cohort::gpu
