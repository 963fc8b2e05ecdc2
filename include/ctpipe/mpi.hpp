// ctpipe::mpi: one process per pipeline rank (times D data-parallel replicas) over MPI. Link the
// CMake target ctpipe::mpi (ctpipe built where MPI is found).
#pragma once

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/mpi/elastic.hpp>
#include <ctpipe/mpi/errors.hpp>
#include <ctpipe/mpi/executor.hpp>
#include <ctpipe/mpi/grid.hpp>
