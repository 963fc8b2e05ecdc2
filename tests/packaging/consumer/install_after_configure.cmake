# A header-only library installs after configure alone: configure ctpipe as a new user does (tests
# off, the explorer on but not built) and install it, with no build step in between.
file(REMOVE_RECURSE ${BIN})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN}/build -DCTPIPE_BUILD_TESTS=OFF
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BIN}/build --prefix ${BIN}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install after configure failed:\n${out}")
endif()
foreach(_f include/ctpipe/ctpipe.hpp include/ctpipe/schedules.hpp share/cmake/ctpipe/ctpipeConfig.cmake)
  if(NOT EXISTS ${BIN}/prefix/${_f})
    message(FATAL_ERROR "install after configure: ${_f} is missing")
  endif()
endforeach()
