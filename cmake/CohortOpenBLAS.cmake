# OpenBLAS, for the convolutions' many small matrix products (core/nn/ops/gemm.h), found through
# its pkg-config file (Debian's libopenblas-dev and OpenBLAS's own install both ship one). Defines
# PkgConfig::OpenBLAS, linked privately: programs using the install need not find it.
find_package(PkgConfig REQUIRED)
pkg_check_modules(OpenBLAS IMPORTED_TARGET openblas)
if(NOT OpenBLAS_FOUND)
  message(FATAL_ERROR "OpenBLAS not found by pkg-config (Debian: libopenblas-dev; scripts/setup.sh installs it)")
endif()
