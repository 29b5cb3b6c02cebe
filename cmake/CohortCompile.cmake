# Compile settings shared by every Cohort target, applied through cohort_target_defaults(), and
# the libraries' build: shared, with the CPU kernels (cohort::nn) once per instruction-set level.
#
# The default build runs on any x86-64 CPU from x86-64-v2 up and still uses the vector units it
# finds: everything is compiled for x86-64-v2, and libcohort_nn (the ops, the optimizers, Eigen's
# products) is compiled again for each level in COHORT_KERNEL_LEVELS into
# lib/glibc-hwcaps/<level>/. The dynamic loader (glibc 2.33+) loads the best copy the CPU supports;
# COHORT_CPU_LEVEL caps it (core/nn/cpu_level.h). One build serves a whole cluster: built on an
# AVX-512 login node, it runs AVX2 kernels on AVX2 compute nodes instead of dying with SIGILL.

set(COHORT_MARCH "" CACHE STRING
  "Build everything for this CPU class only (-march=..., e.g. x86-64-v3); empty: COHORT_NATIVE decides")
if(COHORT_MARCH)
  set(COHORT_ARCH_FLAGS -march=${COHORT_MARCH})
elseif(COHORT_NATIVE)
  # Built to run where it is built, with every vector unit the compiler finds.
  set(COHORT_ARCH_FLAGS -march=native)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(COHORT_ARCH_FLAGS -march=x86-64-v2 -mtune=generic)
  set(COHORT_KERNEL_LEVELS x86-64-v3 x86-64-v4)
else()
  # Other architectures (aarch64): the compiler's baseline, one copy of the kernels.
  set(COHORT_ARCH_FLAGS "")
endif()

# cohort_target_defaults(<target> [ARCH_FLAGS <flag> ...]): warnings, the CPU class (ARCH_FLAGS,
# COHORT_ARCH_FLAGS by default), source paths, sanitizers.
function(cohort_target_defaults target)
  cmake_parse_arguments(D "" "" "ARCH_FLAGS" ${ARGN})
  if(NOT DEFINED D_ARCH_FLAGS)
    set(D_ARCH_FLAGS ${COHORT_ARCH_FLAGS})
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic ${D_ARCH_FLAGS}>
    # GCC 12 at -O3 warns that `"literal" + std::string` may overlap (GCC bug 105329): false.
    $<$<AND:$<COMPILE_LANG_AND_ID:CXX,GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
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
  # Shared, so that each library's state exists once in a program and cohort::nn can be loaded
  # in the copy that fits the CPU (cohort_kernel_levels below).
  add_library(${target} SHARED ${L_SOURCES})
  add_library(cohort::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target} EXPORT_NAME ${name})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${COHORT_BUILD_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  cohort_target_defaults(${target})
  # Calls between a library's own functions may be inlined and bound inside it.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
  install(TARGETS ${target} EXPORT CohortTargets)
  file(RELATIVE_PATH dir "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}")
  set(excludes "")
  foreach(pattern IN LISTS L_HEADER_EXCLUDE)
    list(APPEND excludes PATTERN "${pattern}" EXCLUDE)
  endforeach()
  install(DIRECTORY ./ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cohort/${dir}
          FILES_MATCHING PATTERN "*.h" ${excludes})
endfunction()

# Gives `target`, built from some of a library's sources, what the library itself has: the
# caller's `links`, `includes` and `definitions` (the library's), the project's defaults (extra
# arguments go to cohort_target_defaults, e.g. ARCH_FLAGS), and calls that stay inside the
# library (-fno-semantic-interposition).
function(_cohort_like_library target)
  target_link_libraries(${target} PRIVATE ${links})
  target_include_directories(${target} PRIVATE ${includes})
  if(definitions)
    target_compile_definitions(${target} PRIVATE ${definitions})
  endif()
  cohort_target_defaults(${target} ${ARGN})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
endfunction()

# cohort_kernel_levels(<name> [LEVEL_INDEPENDENT <source> ...]): library cohort_<name> again for
# each level of COHORT_KERNEL_LEVELS, as lib/glibc-hwcaps/<level>/libcohort_<name>.so in the build
# tree and the install. Call it after the library's sources, links and definitions are all given.
# The copies are built with the library, so every program linking it finds them.
# LEVEL_INDEPENDENT names sources whose speed does not depend on the instruction set (loaders,
# graph building, GPU host code): compiled once, at the base level, into every copy. Their objects
# come last on each copy's link line, so where they share a template instance with the kernels the
# linker keeps the copy's own.
function(cohort_kernel_levels name)
  cmake_parse_arguments(K "" "" "LEVEL_INDEPENDENT" ${ARGN})
  set(base cohort_${name})
  # Each copy calls its own functions, and its own instances of templates it shares with the
  # program (Eigen's), not the program's: those may be compiled for a lower level.
  target_link_options(${base} PRIVATE -Wl,-Bsymbolic-functions)
  get_target_property(sources ${base} SOURCES)
  get_target_property(links ${base} LINK_LIBRARIES)
  get_target_property(definitions ${base} COMPILE_DEFINITIONS)
  get_target_property(includes ${base} INCLUDE_DIRECTORIES)
  get_target_property(link_options ${base} LINK_OPTIONS)
  set(once "")
  foreach(source IN LISTS K_LEVEL_INDEPENDENT)
    if(source IN_LIST sources)  # GPU sources are there only when CUDA is built
      list(APPEND once ${source})
    endif()
  endforeach()
  if(once)
    list(REMOVE_ITEM sources ${once})
    set(common ${base}_level_independent)
    add_library(${common} OBJECT ${once})
    _cohort_like_library(${common})
    list(APPEND sources $<TARGET_OBJECTS:${common}>)
    set_property(TARGET ${base} PROPERTY SOURCES ${sources})
  endif()
  file(RELATIVE_PATH to_libdir "/prefix/${CMAKE_INSTALL_LIBDIR}/glibc-hwcaps/level" "/prefix/${CMAKE_INSTALL_LIBDIR}")
  foreach(level IN LISTS COHORT_KERNEL_LEVELS)
    string(REPLACE "-" "_" suffix "${level}")
    set(copy ${base}_${suffix})
    add_library(${copy} SHARED ${sources})
    _cohort_like_library(${copy} ARCH_FLAGS -march=${level})
    if(level STREQUAL "x86-64-v4")
      # GCC 12's AVX-512 intrinsics start from a deliberately undefined register, which its own
      # -Wmaybe-uninitialized flags (GCC bug 105593) in every Eigen packet op. The same sources
      # are checked by the warning in the other copies.
      target_compile_options(${copy} PRIVATE
        $<$<AND:$<COMPILE_LANG_AND_ID:CXX,GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-maybe-uninitialized>)
    endif()
    target_link_options(${copy} PRIVATE ${link_options})
    set_target_properties(${copy} PROPERTIES
      OUTPUT_NAME ${base}
      LIBRARY_OUTPUT_DIRECTORY "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/glibc-hwcaps/${level}"
      INSTALL_RPATH "$ORIGIN/${to_libdir}")
    add_dependencies(${base} ${copy})
    install(TARGETS ${copy} LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}/glibc-hwcaps/${level}")
  endforeach()
endfunction()
