# Configures, builds and runs the consumer project in MODE (find_package or add_subdirectory).
# SCHEDULE_ONLY=ON: with Boost hidden, only the consumer of ctpipe::schedule.
set(_args -S ${SRC} -B ${BIN} -DCONSUMER_MODE=${MODE} -DCMAKE_CXX_COMPILER=${CXX} -DCTPIPE_SOURCE_DIR=${CTPIPE_DIR}
          -DEXPECT_CUDA=${EXPECT_CUDA} -DEXPECT_MPI=${EXPECT_MPI} -DEXPECT_NCCL=${EXPECT_NCCL})
set(_program consumer)
if(SCHEDULE_ONLY)
  list(APPEND _args -DCONSUMER_SCHEDULE_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)
  set(_program consumer_schedule)
endif()
if(MODE STREQUAL "find_package")
  list(APPEND _args -DCMAKE_PREFIX_PATH=${PREFIX})
endif()
file(REMOVE_RECURSE ${BIN})
foreach(_step IN ITEMS configure build run)
  if(_step STREQUAL "configure")
    execute_process(COMMAND ${CMAKE_COMMAND} ${_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  elseif(_step STREQUAL "build")
    # As a subproject, ctpipe's targets are the ones its own tests link (ctpipe::cuda, ::mpi,
    # ::nccl, checked to exist when configuring): the consumer builds only its host programs, and
    # the programs of those targets are built from the installed package (find_package) alone.
    set(_targets)
    if(MODE STREQUAL "add_subdirectory")
      set(_targets --target consumer consumer_schedule)
    endif()
    execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} ${_targets} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE out)
  else()
    execute_process(COMMAND ${BIN}/${_program} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}) failed at ${_step}:\n${out}")
  endif()
endforeach()
