# How ctpipe's tests are built, and which of CI's builds runs each: the one place for that policy.
# (Included by the top CMakeLists.txt where CTPIPE_BUILD_TESTS is on, before examples/ and tests/.)
#
# ctpipe_add_test(<target> LABEL <area> SOURCES <file>...
#                 [RUNNER threads|mpi|own] [LINK <library>...]
#                 [FULL_ONLY] [SANITIZERS tsan]
#                 [MPI_PREFIX <name> PROCESSES <n>...])
#   A test program, compiled with the strict flags, with tests/ on its include path (fixtures are
#   "support/<name>.hpp"). RUNNER says whose main() it has: threads (doctest's, the default), mpi
#   (doctest's between MPI_Init and MPI_Finalize; every process runs the same cases) or own (the
#   program's). A threads program registers one CTest test per doctest case; an mpi one, with
#   MPI_PREFIX, one test per count of processes, `<prefix>np<n>`, running the suite "np<n>" under
#   mpirun -np <n>.
#   FULL_ONLY: left out of a CTPIPE_LEAN_TESTS build (CI's clang build, under ASan+UBSan, which
#   runs every other test; the g++ build runs it). SANITIZERS tsan: CI's ThreadSanitizer build
#   builds and runs it too (CMakePresets.json builds ctpipe_tsan_tests and runs the tests labelled
#   tsan).
#
# ctpipe_add_run(<test> LABEL <area> COMMAND <command>...
#                [TARGET <target>] [SANITIZERS tsan] [MPI] [PROCESSES <n>]
#                [PASS <regex>] [FAIL <regex>] [TIMEOUT <s>] [SKIP_RC <code>])
#   A test that runs a command: a program built elsewhere (TARGET: the ThreadSanitizer build builds
#   it too), a script. MPI: the command is an mpirun (it gets the launcher's environment).

set(CTPIPE_STRICT_FLAGS -Wall -Wextra -Werror -Wpedantic)
# nvcc: its own warnings are errors, and the host compiler's strict flags (less -Wpedantic, which
# the code nvcc generates for the host does not pass).
set(CTPIPE_NVCC_STRICT_FLAGS "SHELL:-Werror all-warnings" "-Xcompiler=-Wall,-Wextra,-Werror")

find_package(doctest CONFIG REQUIRED)
include(${doctest_DIR}/doctest.cmake)

# What CI's ThreadSanitizer build builds (with the tests labelled tsan that it runs). Its
# AddressSanitizer build is the clang build: it builds and runs every test of the lean build.
add_custom_target(ctpipe_tsan_tests)

# One doctest main per kind of runner, compiled once.
add_library(ctpipe_test_main OBJECT ${PROJECT_SOURCE_DIR}/tests/support/main.cpp)
target_link_libraries(ctpipe_test_main PUBLIC doctest::doctest)
if(CTPIPE_HAS_MPI)
  add_library(ctpipe_test_main_mpi OBJECT ${PROJECT_SOURCE_DIR}/tests/support/mpi_main.cpp)
  target_link_libraries(ctpipe_test_main_mpi PUBLIC ctpipe::mpi doctest::doctest)
endif()

# The headers nearly every test source includes (ctpipe.hpp and doctest's), precompiled once per
# build and reused by the test programs that take ctpipe::ctpipe's flags (or ctpipe::mpi's, whose
# macros the headers do not read; not the BLAS or packaging ones, whose sources must meet the
# headers as a user's build does). Parsing them was 6.5 s of a host sweep source's 27 s of g++
# CPU, 1.1 s with it (docs/testing.md). CTPIPE_TEST_PCH=OFF builds without it. g++ and clang.
# (The compile-fail tests have a header of their own, tests/CMakeLists.txt: they are compiled by a
# script, with other flags.)
option(CTPIPE_TEST_PCH "Precompile ctpipe.hpp and doctest.h for the test programs (g++, clang)" ON)
if(CTPIPE_TEST_PCH AND NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(CTPIPE_TEST_PCH OFF)
endif()
if(CTPIPE_TEST_PCH)
  add_library(ctpipe_test_pch OBJECT ${PROJECT_SOURCE_DIR}/tests/support/pch.cpp)
  target_link_libraries(ctpipe_test_pch PRIVATE ctpipe::ctpipe doctest::doctest)
  target_compile_options(ctpipe_test_pch PRIVATE ${CTPIPE_STRICT_FLAGS})
  set_target_properties(ctpipe_test_pch PROPERTIES CXX_EXTENSIONS OFF)  # as tests/ builds its programs
  target_precompile_headers(ctpipe_test_pch PRIVATE <doctest/doctest.h> <ctpipe/ctpipe.hpp>)
endif()
set(_ctpipe_pch_links ctpipe::ctpipe ctpipe::mpi ctpipe_explorer_lib nlohmann_json::nlohmann_json)

# The environment of a test under mpirun.
set(CTPIPE_MPI_TEST_ENV ${CTPIPE_MPI_ENV})
if(CTPIPE_SANITIZE MATCHES "address")
  # Open MPI's own allocations outlive MPI_Finalize: LeakSanitizer would report them as ctpipe's.
  list(APPEND CTPIPE_MPI_TEST_ENV ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
endif()

# The labels of a test: its area and the sanitizer build that runs it; adds `target` to that build.
function(_ctpipe_test_labels out area target)
  set(_labels ${area})
  foreach(_s IN LISTS ARGN)
    if(NOT _s STREQUAL "tsan")
      message(FATAL_ERROR "ctpipe tests: SANITIZERS takes tsan (the ASan+UBSan build runs every test), not '${_s}'")
    endif()
    list(APPEND _labels ${_s})
    if(target)
      add_dependencies(ctpipe_${_s}_tests ${target})
    endif()
  endforeach()
  set(${out} ${_labels} PARENT_SCOPE)
endfunction()

function(ctpipe_add_test target)
  cmake_parse_arguments(T "FULL_ONLY" "LABEL;RUNNER;MPI_PREFIX" "SOURCES;LINK;SANITIZERS;PROCESSES" ${ARGN})
  if(T_UNPARSED_ARGUMENTS OR NOT T_LABEL OR NOT T_SOURCES)
    message(FATAL_ERROR "ctpipe_add_test(${target}): needs LABEL and SOURCES (unknown: ${T_UNPARSED_ARGUMENTS})")
  endif()
  if(T_FULL_ONLY AND CTPIPE_LEAN_TESTS)
    return()
  endif()
  if(NOT T_RUNNER)
    set(T_RUNNER threads)
  endif()
  # ctest cuts a discovered test's name at ';', and the cut name matches no test case: doctest then
  # runs nothing and passes. Such a name is refused here, also where it is written as string literals
  # over several lines (joined first, as the compiler joins them).
  foreach(_src IN LISTS T_SOURCES)
    get_filename_component(_path ${_src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(READ ${_path} _text)
    string(REGEX REPLACE "TEST_CASE\\([ \t\r\n]+\"" "TEST_CASE(\"" _text "${_text}")
    string(REGEX REPLACE "\"[ \t\r\n]+\"" "" _text "${_text}")
    string(REGEX MATCH "TEST_CASE\\(\"[^\"]*;" _cut "${_text}")
    if(_cut)
      message(FATAL_ERROR "${_path}: a test case's name holds ';', where ctest would cut it and then run nothing")
    endif()
  endforeach()
  add_executable(${target} ${T_SOURCES})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  set(_other_links ${T_LINK})
  list(REMOVE_ITEM _other_links ${_ctpipe_pch_links})
  # (Programs with a main of their own link no doctest: the header's registrations would need it.)
  if(CTPIPE_TEST_PCH AND ("ctpipe::ctpipe" IN_LIST T_LINK OR "ctpipe::mpi" IN_LIST T_LINK) AND NOT _other_links
     AND NOT T_LABEL STREQUAL "packaging" AND NOT T_RUNNER STREQUAL "own")
    target_precompile_headers(${target} REUSE_FROM ctpipe_test_pch)
  endif()
  target_link_libraries(${target} PRIVATE ${T_LINK} doctest::doctest)
  target_compile_options(${target} PRIVATE ${CTPIPE_STRICT_FLAGS})
  if(T_RUNNER STREQUAL "threads")
    target_link_libraries(${target} PRIVATE ctpipe_test_main)
  elseif(T_RUNNER STREQUAL "mpi")
    target_link_libraries(${target} PRIVATE ctpipe_test_main_mpi)
  elseif(NOT T_RUNNER STREQUAL "own")
    message(FATAL_ERROR "ctpipe_add_test(${target}): RUNNER is threads, mpi or own, not '${T_RUNNER}'")
  endif()
  _ctpipe_test_labels(_labels ${T_LABEL} ${target} ${T_SANITIZERS})
  if(T_MPI_PREFIX)
    foreach(_np IN LISTS T_PROCESSES)
      ctpipe_add_run(${T_MPI_PREFIX}np${_np} LABEL ${T_LABEL} SANITIZERS ${T_SANITIZERS} MPI PROCESSES ${_np}
                     COMMAND ${CTPIPE_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${_np} $<TARGET_FILE:${target}> -ts=np${_np})
    endforeach()
  elseif(T_RUNNER STREQUAL "threads")
    # doctest's PROPERTIES cannot carry a list of labels: a script CTest reads after the discovered
    # tests labels them all.
    doctest_discover_tests(${target} TEST_LIST ${target}_TESTS)
    set(_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
    file(WRITE ${_file} "if(DEFINED ${target}_TESTS)\n  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${_labels}\")\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
  endif()
endfunction()

function(ctpipe_add_run name)
  cmake_parse_arguments(R "MPI" "LABEL;TARGET;PROCESSES;PASS;FAIL;TIMEOUT;SKIP_RC" "COMMAND;SANITIZERS" ${ARGN})
  if(R_UNPARSED_ARGUMENTS OR NOT R_LABEL OR NOT R_COMMAND)
    message(FATAL_ERROR "ctpipe_add_run(${name}): needs LABEL and COMMAND (unknown: ${R_UNPARSED_ARGUMENTS})")
  endif()
  _ctpipe_test_labels(_labels ${R_LABEL} "${R_TARGET}" ${R_SANITIZERS})
  add_test(NAME ${name} COMMAND ${R_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS "${_labels}")
  if(R_MPI)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${CTPIPE_MPI_TEST_ENV}" TIMEOUT 900)
  endif()
  if(R_PROCESSES)
    set_tests_properties(${name} PROPERTIES PROCESSORS ${R_PROCESSES})
  endif()
  if(R_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${R_TIMEOUT})
  endif()
  if(R_PASS)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${R_PASS}")
  endif()
  if(R_FAIL)
    set_tests_properties(${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${R_FAIL}")
  endif()
  if(R_SKIP_RC)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${R_SKIP_RC})
  endif()
endfunction()
