# libzip, for NumPy .npz archives. Found by its header and library rather than its CMake package,
# whose Debian build names command-line tools (zipcmp, ...) that live in other packages. Defines
# LibZip::zip, linked privately: programs using the install need not find it.
find_path(LIBZIP_INCLUDE_DIR zip.h)
find_library(LIBZIP_LIBRARY zip)
if(NOT LIBZIP_INCLUDE_DIR OR NOT LIBZIP_LIBRARY)
  message(FATAL_ERROR "libzip not found (Debian: libzip-dev; scripts/setup.sh installs it)")
endif()
if(NOT TARGET LibZip::zip)
  add_library(LibZip::zip UNKNOWN IMPORTED)
  set_target_properties(LibZip::zip PROPERTIES
    IMPORTED_LOCATION "${LIBZIP_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LIBZIP_INCLUDE_DIR}")
endif()
