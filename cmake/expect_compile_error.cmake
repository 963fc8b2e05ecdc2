# Compiles SOURCE and passes only when compilation fails with output matching the regex written in
# the file as `// build error: <regex>` (one or more lines; every one must match). A line
# `// build output under: <N> bytes` also bounds the compiler's whole output, counted without the
# include directory's and the source's paths: one mistake, one message, no cascade.
# Usage: cmake -DCOMPILER=... -DSOURCE=... -DINCLUDE=... [-DFLAGS=...] -P expect_compile_error.cmake
file(STRINGS "${SOURCE}" _expect REGEX "^// build error: ")
if(NOT _expect)
  message(FATAL_ERROR "${SOURCE}: no '// build error: <regex>' line")
endif()
separate_arguments(_flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND "${COMPILER}" -std=c++20 -fsyntax-only ${_flags} -I "${INCLUDE}" "${SOURCE}"
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
string(REPLACE "\n" " " _all "${_out} ${_err}")
# A compiler that crashed did not reject the source, whatever it printed first.
if(_all MATCHES "Stack dump:|internal compiler error|PLEASE submit")
  message(FATAL_ERROR "${SOURCE}: the compiler crashed:\n${_out}${_err}")
endif()
foreach(_line IN LISTS _expect)
  string(REGEX REPLACE "^// build error: " "" _re "${_line}")
  if(NOT _all MATCHES "${_re}")
    message(FATAL_ERROR "${SOURCE}: the error does not match '${_re}'. Compiler said:\n${_out}${_err}")
  endif()
endforeach()
file(STRINGS "${SOURCE}" _bound REGEX "^// build output under: [0-9]+ bytes")
if(_bound)
  string(REGEX REPLACE "^// build output under: ([0-9]+) bytes.*" "\\1" _limit "${_bound}")
  # Measured without the checkout's paths, so that where the tree lies changes nothing.
  get_filename_component(_dir "${SOURCE}" DIRECTORY)
  string(REPLACE "${INCLUDE}/" "" _short "${_out}${_err}")
  string(REPLACE "${_dir}/" "" _short "${_short}")
  string(LENGTH "${_short}" _size)
  if(_size GREATER_EQUAL _limit)
    message(FATAL_ERROR "${SOURCE}: rejected, but with ${_size} bytes of output (at most ${_limit}: one message, "
                        "no cascade). Compiler said:\n${_out}${_err}")
  endif()
  message(STATUS "${SOURCE}: ${_size} bytes of output (under ${_limit})")
endif()
message(STATUS "${SOURCE}: rejected as expected")
