// What the NCCL executor throws besides task_failure (a task of this process failed).
#pragma once

#include <stdexcept>
#include <string>

#include <ctpipe/exec/failure.hpp>

namespace ctpipe::nccl {

/// A process count or communicator that does not fit the table, or a bad option: thrown by every
/// process, at construction (ctpipe/exec/failure.hpp).
using ctpipe::launch_error;
/// A task of another process failed (ctpipe/exec/failure.hpp).
using ctpipe::peer_failure;
/// A step did not end within options::timeout (ctpipe/exec/failure.hpp): the executor has aborted
/// its communicators and refuses further steps; the program should end (the job's launcher ends
/// the others).
using ctpipe::timeout_error;

/// An NCCL call failed: names the call, what it was for, and NCCL's words.
class error : public std::runtime_error {
 public:
  error(const std::string& call, const std::string& description, const std::string& context)
      : std::runtime_error("ctpipe::nccl::executor: " + call + " failed (" + context + "): " + description),
        call_(call) {}
  const std::string& call() const noexcept { return call_; }

 private:
  std::string call_;
};

}  // namespace ctpipe::nccl
