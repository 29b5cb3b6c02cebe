# Installation: `cmake --install build --prefix P` lays out
#   P/include/cohort/{mpi,core/*,hooks,gpu}/*.h and cohort.h headers, included as <cohort/...>
#   P/lib/libcohort_*.so                                     the libraries
#   P/lib/glibc-hwcaps/x86-64-v{3,4}/libcohort_nn.so         the CPU kernels for AVX2 and AVX-512
#   P/lib/cmake/Cohort/                                      find_package(Cohort): Cohort::mpi, ...
#   P/lib/pkgconfig/cohort.pc                                pkg-config
#   P/bin/cohort-train                                       the training program
#   P/share/cohort/slurm/*.sbatch                            the Slurm batch scripts
#   P/share/cohort/examples/                                 the examples and their CMakeLists.txt
#   P/share/doc/cohort/                                      README and the manual
#   P/share/modulefiles/cohort/<version>                     Tcl modulefile (Lmod, Environment Modules)
# Each library directory installs its own target (into the CohortTargets export set) and headers,
# apps/ the training program and the examples; this file holds the rest. The CMake package and the
# .pc file find the prefix from their own place in the tree; the modulefile names the prefix given
# at install time.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include("${CMAKE_CURRENT_LIST_DIR}/CohortInstallDirs.cmake")
# Installed programs and libraries find Cohort's libraries beside them (relative to their own
# place, so the tree may be moved) and the others (CUDA, OpenBLAS) where they were linked from.
file(RELATIVE_PATH cohort_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
set(CMAKE_INSTALL_RPATH "$ORIGIN/${cohort_bin_to_lib};$ORIGIN")
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
# The build tree has the same layout (bin/, lib/ and tests/ side by side), so its programs and
# libraries get this RUNPATH when they are linked and keep it when installed. (CMake's own build
# RUNPATH, absolute and padded with empty entries to make room for this one at install, would have
# the loader search the working directory for every library, libc's included.)
if(cohort_bin_to_lib STREQUAL "../lib")
  set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
endif()

set(COHORT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Cohort")
set(COHORT_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(COHORT_INSTALL_MODULEDIR "${CMAKE_INSTALL_DATADIR}/modulefiles/cohort")

install(EXPORT CohortTargets
  NAMESPACE Cohort::
  FILE CohortTargets.cmake
  DESTINATION "${COHORT_INSTALL_CMAKEDIR}")

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/CohortConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/CohortConfig.cmake"
  INSTALL_DESTINATION "${COHORT_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/CohortConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  # Before 1.0 a minor version may change the API.
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/cmake/CohortConfig.cmake"
  "${PROJECT_BINARY_DIR}/cmake/CohortConfigVersion.cmake"
  DESTINATION "${COHORT_INSTALL_CMAKEDIR}")

# pkg-config: the prefix relative to the .pc file's own directory (${pcfiledir}).
file(RELATIVE_PATH COHORT_PC_TO_PREFIX "/prefix/${COHORT_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" COHORT_PC_TO_PREFIX "${COHORT_PC_TO_PREFIX}")
# What the headers include; the libraries' own dependencies are found at run time.
set(COHORT_PC_REQUIRES "eigen3 >= 3.4")
# The public compile definitions of cohort::nn (see core/nn/CMakeLists.txt) and OpenMP. The
# shared libraries, each before the ones it uses, found at run time where they were installed.
set(COHORT_PC_CFLAGS "-DEIGEN_MAX_ALIGN_BYTES=64 -fopenmp")
set(cohort_pc_gpu "")
set(cohort_pc_cuda "")
if(COHORT_HAVE_CUDA)
  string(APPEND COHORT_PC_CFLAGS " -I${CUDAToolkit_INCLUDE_DIRS}")
  set(cohort_pc_gpu "-lcohort_gpu ")
  # cuBLAS and cuDNN are loaded when first used (gpu/libraries.cc), not linked.
  set(cohort_pc_cuda " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -ldl")
endif()
set(COHORT_PC_LIBS "-lcohort_hooks -lcohort_train -lcohort_io -lcohort_dist -lcohort_nn -lcohort_placement ${cohort_pc_gpu}-lcohort_mpi -lcohort_base -fopenmp -pthread${cohort_pc_cuda}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/cohort.pc.in" "${PROJECT_BINARY_DIR}/cmake/cohort.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/cmake/cohort.pc" DESTINATION "${COHORT_INSTALL_PKGCONFIGDIR}")

# The modulefile names the prefix as given at install time (cmake --install --prefix P), not at
# configure time: configure now with the prefix left as a placeholder, fill it in when installing.
# Written straight into the destination (DESTDIR included), so that installing needs no write
# access to the build tree.
set(COHORT_PREFIX "@COHORT_PREFIX@")
# The modules a site's users must load first (the MPI, and CUDA, Cohort was built with), as
# `prereq` lines: -DCOHORT_MODULE_PREREQS="openmpi/4.1;cuda/12.4". The MPI the build used is named
# in the file either way.
set(COHORT_MODULE_PREREQS "" CACHE STRING
    "modules the installed modulefile requires loaded first (a ;-list, e.g. openmpi/4.1), as prereq lines")
set(COHORT_MODULE_PREREQ_LINES "")
foreach(module IN LISTS COHORT_MODULE_PREREQS)
  string(APPEND COHORT_MODULE_PREREQ_LINES "prereq ${module}\n")
endforeach()
list(JOIN MPI_CXX_INCLUDE_DIRS " " cohort_mpi_includes)
# The library's own release, the one a site's module is named after (FindMPI's MPI_CXX_VERSION is
# the standard's, 3.1), read off mpi.h: Open MPI's version macros, or the version string of Intel
# MPI, MVAPICH2 or MPICH (which the first two define as well), in that order.
set(cohort_mpi_library "MPI")
unset(COHORT_MPI_H CACHE)  # searched again at each configure: the MPI may have changed
find_file(COHORT_MPI_H mpi.h PATHS ${MPI_CXX_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
if(COHORT_MPI_H)
  file(STRINGS "${COHORT_MPI_H}" cohort_mpi_defines
       REGEX "^#define (OMPI_(MAJOR|MINOR|RELEASE)_VERSION|MPICH_VERSION|MVAPICH2_VERSION|I_MPI_VERSION) ")
  set(cohort_ompi "")
  set(cohort_releases "")
  foreach(line IN LISTS cohort_mpi_defines)
    if(line MATCHES "^#define OMPI_[A-Z]+_VERSION +([0-9]+)")
      list(APPEND cohort_ompi "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^#define ([A-Z_0-9]+)_VERSION +\"([^\"]+)\"")
      set(cohort_release_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  if(cohort_ompi)
    list(JOIN cohort_ompi "." cohort_ompi)
    set(cohort_mpi_library "Open MPI ${cohort_ompi}")
  elseif(DEFINED cohort_release_I_MPI)
    set(cohort_mpi_library "Intel MPI ${cohort_release_I_MPI}")
  elseif(DEFINED cohort_release_MVAPICH2)
    set(cohort_mpi_library "MVAPICH2 ${cohort_release_MVAPICH2}")
  elseif(DEFINED cohort_release_MPICH)
    set(cohort_mpi_library "MPICH ${cohort_release_MPICH}")
  endif()
endif()
set(COHORT_BUILT_WITH_MPI
    "${cohort_mpi_library} (MPI ${MPI_CXX_VERSION}) from ${MPI_CXX_COMPILER} (headers ${cohort_mpi_includes})")
file(RELATIVE_PATH COHORT_MODULEDIR_TO_PREFIX "/prefix/${COHORT_INSTALL_MODULEDIR}" "/prefix")
configure_file("${PROJECT_SOURCE_DIR}/slurm/cohort.modulefile.in"
  "${PROJECT_BINARY_DIR}/cmake/modulefile.in" @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/cmake/modulefile.in\" text)
  string(REPLACE \"@COHORT_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" text \"\${text}\")
  set(modulefile \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${COHORT_INSTALL_MODULEDIR}/${PROJECT_VERSION}\")
  message(STATUS \"Installing: \${modulefile}\")
  file(WRITE \"\${modulefile}\" \"\${text}\")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${modulefile}\")")

# The umbrella header <cohort/cohort.h>, the batch scripts, the manual.
install(FILES "${PROJECT_SOURCE_DIR}/cohort.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/cohort")
install(PROGRAMS
  "${PROJECT_SOURCE_DIR}/slurm/single_node.sbatch"
  "${PROJECT_SOURCE_DIR}/slurm/multi_node.sbatch"
  "${PROJECT_SOURCE_DIR}/slurm/gpu.sbatch"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/cohort/slurm")
set(COHORT_INSTALL_DOCDIR "${CMAKE_INSTALL_DATAROOTDIR}/doc/cohort")
install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION "${COHORT_INSTALL_DOCDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION "${COHORT_INSTALL_DOCDIR}"
  FILES_MATCHING PATTERN "*.md")
