# Decides whether the GPU backend (gpu/) is built: COHORT_WITH_CUDA is AUTO, ON or OFF.
# AUTO builds it when nvcc, cuBLAS and cuDNN are all found; ON makes their absence an error.
set(COHORT_HAVE_CUDA OFF)
string(TOUPPER "${COHORT_WITH_CUDA}" cohort_cuda_mode)
if(NOT cohort_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "COHORT_WITH_CUDA must be AUTO, ON or OFF, not '${COHORT_WITH_CUDA}'")
endif()

if(NOT cohort_cuda_mode STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  # nvcc compiles the host half of .cu files with this compiler: the same one as the .cc files,
  # so both halves agree on the standard library and ABI.
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  set(cohort_cuda_missing "")
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # The visible GPU's architecture where there is one, else Hopper (sm_90 code plus PTX).
      execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE cohort_smi_rc OUTPUT_QUIET ERROR_QUIET)
      if(cohort_smi_rc EQUAL 0)
        set(CMAKE_CUDA_ARCHITECTURES native)
      else()
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
    endif()
    # One shared CUDA runtime per process, the one cuBLAS and cuDNN users load. Set for every
    # target, not just gpu/: executables linking cohort_gpu get the runtime from their own
    # property, which otherwise defaults to the static one (-lcudart_static).
    if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
      set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    endif()
    enable_language(CUDA)
    # nvcc 12+ accepts -std=c++20, but some CMake versions (3.25, Debian 12's) do not know it and
    # refuse CUDA_STANDARD 20. Give them the switch newer CMake versions use.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
       AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
       AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    find_package(CUDAToolkit)
    if(NOT TARGET CUDA::cublas)
      list(APPEND cohort_cuda_missing cuBLAS)
    endif()
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
      list(APPEND cohort_cuda_missing cuDNN)
    elseif(NOT TARGET CUDNN::headers)
      # CMake ships no cuDNN module. gpu/ compiles against the headers and loads the library when
      # first used (gpu/libraries.cc), so the target carries the headers alone.
      add_library(CUDNN::headers INTERFACE IMPORTED)
      set_target_properties(CUDNN::headers PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
    endif()
  else()
    set(cohort_cuda_missing nvcc)
  endif()

  if(cohort_cuda_missing)
    if(cohort_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "COHORT_WITH_CUDA=ON but not found: ${cohort_cuda_missing}")
    endif()
    message(STATUS "Cohort: building CPU-only (not found: ${cohort_cuda_missing}); set COHORT_WITH_CUDA=ON to require the GPU backend")
  else()
    set(COHORT_HAVE_CUDA ON)
    message(STATUS "Cohort: building the GPU backend (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  endif()
else()
  message(STATUS "Cohort: building CPU-only (COHORT_WITH_CUDA=OFF)")
endif()
