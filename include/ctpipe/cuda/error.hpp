// The CUDA executors' error: a CUDA call that failed, with the call, its code, and the task it was
// issued for (rank, stage, microbatch, op) where there was one.
#pragma once

#include <stdexcept>
#include <string>

#include <ctpipe/schedule/task.hpp>

namespace ctpipe::cuda {

/// A CUDA call failed. Names the call, and the rank, stage, microbatch and op when it was issued
/// for a task (rank() == -1 otherwise: construction, step set-up, waiting).
class error : public std::runtime_error {
 public:
  error(const std::string& call, int code, const std::string& description, const std::string& context, int rank = -1,
        task t = {})
      : std::runtime_error("ctpipe::cuda::executor: " + call + " failed " +
                           (rank >= 0 ? "at rank " + std::to_string(rank) + ", stage " + std::to_string(t.stage) +
                                            ", microbatch " + std::to_string(t.microbatch) + ", op " +
                                            std::string(op_name(t.op))
                                      : "(" + context + ")") +
                           ": " + description),
        call_(call),
        code_(code),
        rank_(rank),
        task_(t) {}
  /// The CUDA runtime function that failed.
  const std::string& call() const noexcept { return call_; }
  /// Its error code (a cudaError_t).
  int code() const noexcept { return code_; }
  int rank() const noexcept { return rank_; }
  int stage() const noexcept { return rank_ >= 0 ? task_.stage : -1; }
  int microbatch() const noexcept { return rank_ >= 0 ? task_.microbatch : -1; }
  op_kind op() const noexcept { return task_.op; }

 private:
  std::string call_;
  int code_;
  int rank_;
  task task_;
};

}  // namespace ctpipe::cuda
