# Test registration helpers. MPI tests are launched through FindMPI's MPIEXEC_* variables, so a
# site with srun or another launcher only changes the cache, not the tests.

set(COHORT_TEST_TIMEOUT 120 CACHE STRING "Default ctest timeout per test, seconds")
set(COHORT_MPIEXEC_FLAGS --oversubscribe CACHE STRING "Extra flags for MPIEXEC_EXECUTABLE in tests")

# Environment for every MPI test: more ranks than cores must not starve each other. When a rank
# exits with an error, Open MPI 4's mpirun sends the job's processes SIGCONT, SIGTERM and SIGKILL
# a second apart (odls_base_sigkill_timeout), also to processes that have exited already: two
# idle seconds for each of the many failing jobs the tests run. Without that pause, SIGKILL
# follows SIGTERM at once; the tests that check what a rank does on SIGTERM send it to the rank
# themselves, and the run tests that check what a failing job does not print (NOT_REGEX: no
# "final:" line from a peer stopping on mpirun's SIGTERM, say) keep Open MPI's default.
set(COHORT_TEST_ENV OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
    OMPI_MCA_odls_base_sigkill_timeout=0)
execute_process(COMMAND id -u OUTPUT_VARIABLE cohort_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(cohort_uid STREQUAL "0")
  list(APPEND COHORT_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
endif()

# The network path two Debian nodes would take, forced on one machine: TCP alone, and the
# one-sided components Debian's openmpi-mca-params.conf leaves, less the shared-memory one that
# two nodes cannot use. Open MPI then has no one-sided transport (MPI_Win_allocate fails).
set(COHORT_TCP_ONLY_ENV OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo "OMPI_MCA_osc=^sm,ucx,pt2pt")
# The same with Open MPI's osc pt2pt let in, as an Open MPI built without Debian's exclusion of it
# gives on an Ethernet cluster: MPI_Win_allocate succeeds, but a transfer moves only when its
# target calls MPI.
set(COHORT_TCP_PT2PT_ENV OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo "OMPI_MCA_osc=^sm,ucx")
# Open MPI's UCX components, the stack InfiniBand clusters run, here over UCX's TCP transport.
# Debian's Open MPI leaves osc ucx out, and opens pml ucx on Mellanox devices only, unless told.
set(COHORT_UCX_TCP_ENV OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx OMPI_MCA_pml_ucx_tls=any
    OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo)
# Whether this MPI is an Open MPI with both UCX components.
set(COHORT_MPI_HAS_UCX OFF)
get_filename_component(cohort_mpi_bin "${MPIEXEC_EXECUTABLE}" DIRECTORY)
find_program(COHORT_OMPI_INFO ompi_info HINTS ${cohort_mpi_bin})
if(COHORT_OMPI_INFO)
  execute_process(COMMAND ${COHORT_OMPI_INFO} OUTPUT_VARIABLE cohort_ompi_info ERROR_QUIET)
  if(cohort_ompi_info MATCHES "MCA pml: ucx" AND cohort_ompi_info MATCHES "MCA osc: ucx")
    set(COHORT_MPI_HAS_UCX ON)
  endif()
endif()

# The command prefix that runs `np` ranks.
function(cohort_mpiexec out np)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${COHORT_MPIEXEC_FLAGS}
      ${MPIEXEC_PREFLAGS} PARENT_SCOPE)
endfunction()

# cohort_add_test_program(NAME SOURCES ... [LIBS ...])
# A program the tests run (a command-line driver), built into the tests directory.
function(cohort_add_test_program name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  cohort_target_defaults(${name})
  # The test code itself checks and compares; the work it checks runs in the libraries, built as
  # configured. -O1 compiles it in three quarters of -O3's time.
  target_compile_options(${name} PRIVATE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo>>:-O1>)
  # Each test file keeps its helpers file-local, and two files of a program may name theirs alike:
  # never compiled as one unit, whatever CMAKE_UNITY_BUILD says.
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests"
                                           UNITY_BUILD OFF)
endfunction()

# cohort_add_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [MAIN target])
# A serial doctest executable, run once. MAIN is the library with its main() (the plain doctest
# one by default); a test whose main exits 77 is reported as skipped.
function(cohort_add_test name)
  cmake_parse_arguments(T "" "MAIN" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_MAIN)
    set(T_MAIN cohort_test_main)
  endif()
  cohort_add_test_program(${name} SOURCES ${T_SOURCES} LIBS ${T_LIBS} ${T_MAIN})
  set_property(GLOBAL APPEND PROPERTY COHORT_UNIT_TEST_PROGRAMS ${name})
  if("cpu_only" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY COHORT_CPU_ONLY_TEST_PROGRAMS ${name})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${COHORT_TEST_TIMEOUT} LABELS "unit;${T_LABELS}"
    ENVIRONMENT "${COHORT_TEST_ENV}" SKIP_RETURN_CODE 77)
endfunction()

# cohort_add_mpi_test(NAME SOURCES ... NP 1 2 3 4 [LIBS ...] [LABELS ...] [TIMEOUT s])
# A doctest executable built on tests/support/mpi_test.h, run once per rank count.
function(cohort_add_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;NP;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${COHORT_TEST_TIMEOUT})
  endif()
  cohort_add_test_program(${name} SOURCES ${T_SOURCES} LIBS ${T_LIBS} cohort_test_mpi_main)
  # The largest size: a case for more ranks than that would run nowhere (mpi_test_main.cc fails it).
  set(largest 0)
  foreach(np IN LISTS T_NP)
    if(np GREATER largest)
      set(largest ${np})
    endif()
  endforeach()
  foreach(np IN LISTS T_NP)
    cohort_mpiexec(launcher ${np})
    add_test(NAME ${name}.np${np} COMMAND ${launcher} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${name}.np${np} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS 2
      LABELS "mpi;${T_LABELS}" ENVIRONMENT "${COHORT_TEST_ENV};COHORT_TEST_LARGEST_NP=${largest}")
  endforeach()
endfunction()

# cohort_add_run_test(NAME name NP n [EXPECT_FAIL] [REGEX re ...] [NOT_REGEX re] [TIMEOUT s]
#                     [ENV VAR=value ...] COMMAND exe args...)
# Runs a program under mpiexec (NP 0: without it) and checks its exit status and output: with
# EXPECT_FAIL it must exit non-zero, else zero; every REGEX must match the combined output.
function(cohort_add_run_test)
  cmake_parse_arguments(T "EXPECT_FAIL" "NAME;NP;TIMEOUT;EXIT_CODE" "REGEX;NOT_REGEX;COMMAND;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${COHORT_TEST_TIMEOUT})
  endif()
  set(launcher "")
  if(T_NP)
    cohort_mpiexec(launcher ${T_NP})
  endif()
  # Each list travels as one quoted -D argument and the script splits it again; escaping its
  # semicolons here would keep them from splitting there.
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND}
    "-DCOMMAND=${launcher};${T_COMMAND}" "-DREGEX=${T_REGEX}" "-DNOT_REGEX=${T_NOT_REGEX}"
    "-DEXPECT_FAIL=${T_EXPECT_FAIL}" "-DEXIT_CODE=${T_EXIT_CODE}"
    -P ${PROJECT_SOURCE_DIR}/cmake/CohortRunCheck.cmake)
  set(env ${COHORT_TEST_ENV} ${T_ENV})
  if(T_NOT_REGEX)
    list(APPEND env OMPI_MCA_odls_base_sigkill_timeout=1)
  endif()
  # One process (no launcher, or one rank of one program) shares the two cores with another test.
  set(processors 2)
  if(NOT T_NP OR (T_NP EQUAL 1 AND NOT ":" IN_LIST T_COMMAND))
    set(processors 1)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${processors}
    LABELS "run;${T_LABELS}" ENVIRONMENT "${env}")
endfunction()
