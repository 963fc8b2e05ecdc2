// The CUDA engine's errors: a failed backend call becomes ctpipe::cuda::error, and anything a
// layer threw becomes a task_failure naming the task. One copy per backend in a program (the
// engine derives from backend_calls), not one per engine: a program with many executors, or one
// executor of one process per rank (an engine per rank), compiles them once.
#pragma once

#include <string_view>

#include <ctpipe/config.hpp>  // CTPIPE_NOINLINE
#include <ctpipe/cuda/error.hpp>
#include <ctpipe/exec/failure.hpp>  // task_failure
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::cuda::detail {

template <class Backend>
struct backend_calls {
  static void check(typename Backend::status s, const char* call, const char* context) {
    if (!Backend::ok(s)) [[unlikely]]
      throw error(call, Backend::code(s), Backend::describe(s), context);
  }
  // Out of line and shared by every task: the code of a task holds only the test and a call.
  [[noreturn]] CTPIPE_NOINLINE static void fail(typename Backend::status s, const char* call, int rank, task t) {
    throw error(call, Backend::code(s), Backend::describe(s), "", rank, t);
  }
};

/// In a handler: errors of the executor (`who`) pass through; anything user code threw becomes a
/// task_failure naming the task.
[[noreturn]] CTPIPE_NOINLINE inline void rethrow_as_task_failure(std::string_view who, int rank, task t) {
  try {
    throw;
  } catch (const error&) {
    throw;
  } catch (const task_failure&) {
    throw;
  } catch (...) {
    const auto cause = std::current_exception();
    throw task_failure(who, rank, t, cause);
  }
}

}  // namespace ctpipe::cuda::detail
