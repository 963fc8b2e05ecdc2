// What the MPI executor throws besides task_failure (a task of this process failed).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/exec/failure.hpp>

namespace ctpipe::mpi {

/// Not ranks x replicas processes, or not all with the same table, stage plan and tensor sizes
/// (ctpipe/exec/failure.hpp).
using ctpipe::launch_error;
/// A task of another process failed (ctpipe/exec/failure.hpp).
using ctpipe::peer_failure;
/// A peer died or hangs (ctpipe/exec/failure.hpp): the program should end (MPI_Abort).
using ctpipe::timeout_error;

/// An MPI call returned an error (the executor's communicators return errors rather than abort).
class mpi_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ctpipe::mpi
