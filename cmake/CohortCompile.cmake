# Compile settings shared by every Cohort target, applied through cohort_target_defaults().

if(COHORT_NATIVE)
  # Source builds run where they are built: let the compiler use every vector unit it finds
  # (AVX-512 on the development machines). Eigen's GEMM kernels depend on this most.
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
