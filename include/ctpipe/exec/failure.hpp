// What the executors throw: task_failure when user code (a layer, a loss) fails inside a task;
// peer_failure, launch_error and timeout_error from the executors of one process per rank (MPI,
// NCCL), which also name these in their own namespaces (ctpipe::mpi::launch_error is this one).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

namespace detail {
// The message of an exception_ptr's exception ("unknown exception" if it is not a std::exception).
inline std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace detail

/// A task of a step failed: carries the rank, stage, microbatch and op, and the original exception.
/// what(): "<executor>: rank 2, stage 2, microbatch 3, op F failed: <the original message>", where
/// <executor> names the executor that ran the task ("ctpipe::host_executor", "ctpipe::cuda::executor",
/// "ctpipe::mpi::executor"). Where the pipeline has data-parallel replicas, the replica follows the
/// rank: "rank 2, replica 1, stage 2, ...".
class task_failure : public std::runtime_error {
 public:
  task_failure(std::string_view executor, int rank, task t, std::exception_ptr cause, int replica = -1)
      : std::runtime_error(describe(executor, rank, replica, t, detail::describe_exception(cause))),
        executor_(executor),
        rank_(rank),
        replica_(replica),
        task_(t),
        cause_(std::move(cause)) {}
  /// The executor that ran the task.
  const std::string& executor() const noexcept { return executor_; }
  int rank() const noexcept { return rank_; }
  /// The data-parallel replica whose rank failed; -1 where the executor has none.
  int replica() const noexcept { return replica_; }
  int stage() const noexcept { return task_.stage; }
  int microbatch() const noexcept { return task_.microbatch; }
  op_kind op() const noexcept { return task_.op; }
  /// The exception the layer (or loss) threw.
  const std::exception_ptr& cause() const noexcept { return cause_; }

 private:
  static std::string describe(std::string_view executor, int rank, int replica, task t, const std::string& message) {
    std::string s(executor);
    s += ": rank ";
    s += std::to_string(rank);
    if (replica >= 0) {
      s += ", replica ";
      s += std::to_string(replica);
    }
    s += ", stage ";
    s += std::to_string(t.stage);
    s += ", microbatch ";
    s += std::to_string(t.microbatch);
    s += ", op ";
    s += op_name(t.op);
    s += " failed: ";
    s += message;
    return s;
  }

  std::string executor_;
  int rank_;
  int replica_;
  task task_;
  std::exception_ptr cause_;
};

/// A task of another process failed (executors of one process per rank), and this process ended
/// its step: names that process's rank, replica, stage, microbatch and op, and carries its message
/// where the executor can carry it (as a std::runtime_error in cause()).
class peer_failure : public task_failure {
 public:
  peer_failure(std::string_view executor, int process, int rank, int replica, task t, const std::string& message)
      : task_failure(executor, rank, t, std::make_exception_ptr(std::runtime_error(message)), replica),
        process_(process) {}
  /// The failed process's rank in the executor's communicator.
  int process() const noexcept { return process_; }

 private:
  int process_;
};

/// The processes of a job were started wrongly (a process count or communicator that does not fit
/// the table; processes built from different tables, stage plans or tensor sizes; a bad option):
/// thrown by every process, from the executor's constructor, before any step.
class launch_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A wait (a message, a gradient sum, the step's end) took longer than the executor's
/// options::timeout: a peer died or hangs. The processes can no longer agree on the state of the
/// step: the executor refuses further steps, and the program should end (MPI_Abort, or the job's
/// launcher ending the others).
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ctpipe
