# Compile settings shared by every Cohort target, applied through cohort_target_defaults().

set(COHORT_MARCH "" CACHE STRING
  "Build for this CPU class (-march=..., e.g. x86-64-v3 for AVX2 nodes); empty: COHORT_NATIVE decides")
if(COHORT_MARCH)
  # Building on a login node for compute nodes of another class.
  set(COHORT_ARCH_FLAGS -march=${COHORT_MARCH})
elseif(COHORT_NATIVE)
  # Source builds run where they are built: let the compiler use every vector unit it finds
  # (AVX-512 on the development machines). The ops' vector loops depend on this most (OpenBLAS
  # picks its own kernels at run time).
  set(COHORT_ARCH_FLAGS -march=native)
else()
  set(COHORT_ARCH_FLAGS -march=x86-64-v2 -mtune=generic)
endif()

function(cohort_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic ${COHORT_ARCH_FLAGS}>
    # Paths in __FILE__ (flag help, error locations) relative to the source tree, also in headers
    # reached through the build tree's include/cohort link (GCC tries the last map first).
    $<$<COMPILE_LANGUAGE:C,CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=
      -fmacro-prefix-map=${COHORT_BUILD_INCLUDE_DIR}/cohort/=>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=
      -Xcompiler=-fmacro-prefix-map=${COHORT_BUILD_INCLUDE_DIR}/cohort/=>)
  if(COHORT_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${COHORT_SANITIZE} -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${COHORT_SANITIZE})
  endif()
endfunction()

# cohort_library(<name> SOURCES ... [HEADER_EXCLUDE <glob> ...])
# One library directory: target cohort_<name>, alias cohort::<name> (Cohort::<name> once
# installed), headers included as "cohort/<dir>/<file>.h" from the build tree and the install,
# the shared compile settings, and the install of the library and of the directory's headers
# (except those matching HEADER_EXCLUDE). Links are declared by the caller.
function(cohort_library name)
  cmake_parse_arguments(L "" "" "SOURCES;HEADER_EXCLUDE" ${ARGN})
  set(target cohort_${name})
  add_library(${target} ${L_SOURCES})
  add_library(cohort::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target} EXPORT_NAME ${name})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${COHORT_BUILD_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:include>)
  cohort_target_defaults(${target})
  install(TARGETS ${target} EXPORT CohortTargets)
  file(RELATIVE_PATH dir "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}")
  set(excludes "")
  foreach(pattern IN LISTS L_HEADER_EXCLUDE)
    list(APPEND excludes PATTERN "${pattern}" EXCLUDE)
  endforeach()
  install(DIRECTORY ./ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cohort/${dir}
          FILES_MATCHING PATTERN "*.h" ${excludes})
endfunction()
