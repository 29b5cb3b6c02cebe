# The install tree is relocatable: programs find Cohort's libraries through a RUNPATH relative to
# their own place ($ORIGIN), the pkg-config file and the modulefile find the prefix from theirs.
# So the directories inside it are paths relative to the prefix; an absolute one (GNUInstallDirs
# allows it) would give those relative paths nonsense. Included by CohortInstall.cmake, and run
# alone by a test: cmake -DCMAKE_INSTALL_DATADIR=/x -P cmake/CohortInstallDirs.cmake.
foreach(dir BINDIR LIBDIR INCLUDEDIR DATADIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    message(FATAL_ERROR "CMAKE_INSTALL_${dir}=${CMAKE_INSTALL_${dir}} is absolute: Cohort's install "
                        "tree is relocatable and needs it relative to CMAKE_INSTALL_PREFIX, as "
                        "GNUInstallDirs' default is")
  endif()
endforeach()
