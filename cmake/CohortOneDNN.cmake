# oneDNN, for the large matrix products (core/nn/ops/gemm.h), where its JIT kernels run faster
# than OpenBLAS's. COHORT_WITH_ONEDNN: AUTO (default: use it when found), ON (required) or OFF
# (every product through OpenBLAS). Sets COHORT_HAVE_ONEDNN and, when true, target DNNL::dnnl
# (Debian: libdnnl-dev; scripts/setup.sh installs it on x86-64).
set(COHORT_WITH_ONEDNN AUTO CACHE STRING "Large matrix products through oneDNN: AUTO, ON or OFF")
set_property(CACHE COHORT_WITH_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(COHORT_HAVE_ONEDNN OFF)
if(NOT COHORT_WITH_ONEDNN STREQUAL "OFF")
  if(COHORT_WITH_ONEDNN STREQUAL "ON")
    find_package(dnnl CONFIG REQUIRED)
  else()
    find_package(dnnl CONFIG QUIET)
  endif()
  if(TARGET DNNL::dnnl)
    set(COHORT_HAVE_ONEDNN ON)
    message(STATUS "Cohort: large matrix products through oneDNN ${dnnl_VERSION}")
  else()
    message(STATUS
      "Cohort: oneDNN not found (Debian: libdnnl-dev); every matrix product through OpenBLAS")
  endif()
endif()
