# oneDNN, for the large matrix products (core/nn/ops/gemm.h), where its JIT kernels run faster
# than OpenBLAS's. COHORT_WITH_ONEDNN: AUTO (default: use it when found), ON (required) or OFF
# (every product through OpenBLAS). Sets COHORT_HAVE_ONEDNN and, when true, target DNNL::dnnl
# (Debian: libdnnl-dev and ocl-icd-opencl-dev, which its CMake package requires;
# scripts/setup.sh installs both on x86-64).
set(COHORT_WITH_ONEDNN AUTO CACHE STRING "Large matrix products through oneDNN: AUTO, ON or OFF")
set_property(CACHE COHORT_WITH_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(COHORT_HAVE_ONEDNN OFF)
if(NOT COHORT_WITH_ONEDNN STREQUAL "OFF")
  if(COHORT_WITH_ONEDNN STREQUAL "ON")
    find_package(dnnl CONFIG REQUIRED)
  else()
    # A oneDNN built with the OpenCL GPU runtime (Debian's) has a package config that requires
    # OpenCL and stops the configure when it is missing; in AUTO mode that means "no oneDNN".
    find_file(COHORT_DNNL_CONFIG dnnl-config.cmake
              PATH_SUFFIXES lib/cmake/dnnl lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl)
    if(COHORT_DNNL_CONFIG)
      file(STRINGS "${COHORT_DNNL_CONFIG}" opencl_runtime REGEX "DNNL_GPU_RUNTIME \"OCL\"")
    endif()
    if(opencl_runtime)
      find_package(OpenCL QUIET)
    endif()
    if(opencl_runtime AND NOT OpenCL_FOUND)
      set(onednn_missing "oneDNN's CMake package needs OpenCL (Debian: ocl-icd-opencl-dev)")
    else()
      find_package(dnnl CONFIG QUIET)
    endif()
  endif()
  if(TARGET DNNL::dnnl)
    set(COHORT_HAVE_ONEDNN ON)
    message(STATUS "Cohort: large matrix products through oneDNN ${dnnl_VERSION}")
  else()
    if(NOT onednn_missing)
      set(onednn_missing "oneDNN not found (Debian: libdnnl-dev)")
    endif()
    message(STATUS "Cohort: ${onednn_missing}; every matrix product through OpenBLAS")
  endif()
endif()
