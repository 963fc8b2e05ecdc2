// What the MPI executor throws besides task_failure (a task of this process failed).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/exec/failure.hpp>

namespace ctpipe::mpi {

/// The processes were started wrongly: not ranks x replicas of them, or not all with the same
/// table, stage plan and tensor sizes. Thrown by every process, from the executor's constructor,
/// before any step.
class launch_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A task of another process failed (ctpipe/exec/failure.hpp).
using ctpipe::peer_failure;

/// A wait (a message, a gradient sum, the step's end) took longer than options::timeout: a peer
/// died or hangs. The processes can no longer agree on the state of the step: the executor refuses
/// further steps, and the program should end (MPI_Abort), which ends every process of the job.
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An MPI call returned an error (the executor's communicators return errors rather than abort).
class mpi_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ctpipe::mpi
