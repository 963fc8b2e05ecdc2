// How an executor turns a program (the tasks one thread runs, in order) into code.
#pragma once

#include <ctpipe/detail/index.hpp>  // ix

#include <cstddef>
#include <cstdint>

namespace ctpipe {

/// How an executor expands a program into code. Both keep every task's op and stage (so its stage's
/// tensor types and the layers it calls) a compile-time constant at its call site; they differ in
/// where a task's microbatch and slots live. Either way the work of a task (its stage's F, B, I or W,
/// a send, a receive) is compiled once per (rank, op, stage) and takes the microbatch and slots as
/// data; where that work is small the compiler inlines it and the constants come back. Measured side
/// by side in bench/README.md (time per task, code size, compile time).
enum class dispatch : std::uint8_t {
  /// One call per task, in order, each inlined with its arguments as constants: straight-line code,
  /// no loop and no branch between tasks. Code grows with the program (about 30 bytes a near-empty task), not
  /// with the layers: a stage's work is not copied into each of its tasks.
  unrolled,
  /// A loop over the program as a constexpr array: each entry selects one of the program's few
  /// (rank, op, stage) branches with an index switch, all inlined, and carries the microbatch and
  /// slots as data. Code grows with the number of distinct (rank, op, stage), not with the program.
  table_walk,
  /// unrolled where the longest program an executor runs on one thread has at most that executor's
  /// unroll limit of tasks, else table_walk. A program is what one thread issues: on the host
  /// executor one rank's program (limit ctpipe::automatic_unroll_limit, 1,024), on the CUDA
  /// executor the whole step in its global issue order (limit ctpipe::cuda::automatic_unroll_limit,
  /// 256). Past the limit unrolling costs compile time for a fraction of a nanosecond a task.
  automatic,
};

/// The host executor's limit for dispatch::automatic, in tasks of one rank's program: past it,
/// unrolling costs minutes of compile time (figures: bench/README.md, "Code size and compile time").
inline constexpr int automatic_unroll_limit = 1024;

/// The strategy an executor uses: `requested`, or for dispatch::automatic the one its limit picks for
/// a longest program of `longest` tasks.
constexpr dispatch resolve_dispatch(dispatch requested, std::size_t longest, int limit) {
  if (requested != dispatch::automatic) return requested;
  return longest <= detail::ix(limit) ? dispatch::unrolled : dispatch::table_walk;
}

}  // namespace ctpipe
