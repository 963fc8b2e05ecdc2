// The executor core's dispatch: runs a program (exec/detail/program.hpp) on a runner, unrolled or
// as a table walk. A runner is the executor's part: `template <task_code C, class A> void run(const
// A& a, std::size_t index)` runs (or issues) one task with code C; `a` holds its arguments (the
// program entry's: constants wherever run() is inlined into an unrolled block), and `index` is its
// position in the program. run() is compiled once per code, not once per task.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>        // CTPIPE_NOINLINE, CTPIPE_UNREACHABLE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/program.hpp>
#include <ctpipe/exec/dispatch.hpp>

namespace ctpipe::detail {

/// Calls f(std::integral_constant<std::size_t, i>{}) for a run-time i < N, through a switch (a jump
/// table where the compiler likes one), split in halves above 16 cases, in the manner of Mp11's
/// mp_with_index. i >= N is undefined.
template <std::size_t N, std::size_t Base = 0, class F>
inline void with_index(std::size_t i, F&& f) {
  static_assert(N > Base, "ctpipe::detail::with_index: no index to select");
  if constexpr (N - Base > 16) {
    constexpr std::size_t mid = Base + (N - Base) / 2;
    if (i < mid)
      with_index<mid, Base>(i, f);
    else
      with_index<N, mid>(i, f);
  } else {
#define CTPIPE_DETAIL_CASE(k)                               \
  case k:                                                   \
    if constexpr (Base + (k) < N) {                         \
      f(std::integral_constant<std::size_t, Base + (k)>{}); \
      return;                                               \
    } else {                                                \
      break;                                                \
    }
    switch (i - Base) {
      CTPIPE_DETAIL_CASE(0)
      CTPIPE_DETAIL_CASE(1)
      CTPIPE_DETAIL_CASE(2)
      CTPIPE_DETAIL_CASE(3)
      CTPIPE_DETAIL_CASE(4)
      CTPIPE_DETAIL_CASE(5)
      CTPIPE_DETAIL_CASE(6)
      CTPIPE_DETAIL_CASE(7)
      CTPIPE_DETAIL_CASE(8)
      CTPIPE_DETAIL_CASE(9)
      CTPIPE_DETAIL_CASE(10)
      CTPIPE_DETAIL_CASE(11)
      CTPIPE_DETAIL_CASE(12)
      CTPIPE_DETAIL_CASE(13)
      CTPIPE_DETAIL_CASE(14)
      CTPIPE_DETAIL_CASE(15)
      default:
        break;
    }
#undef CTPIPE_DETAIL_CASE
    CTPIPE_UNREACHABLE();
  }
}

/// Unrolled programs are cut into blocks of this many tasks, each a function of its own: one call
/// per block costs nothing measurable, and it keeps the compiler's work linear in the program (as
/// one function, a 4,096-task program took gigabytes to compile: bench/README.md).
inline constexpr std::size_t unroll_block = 256;

// The runner travels by value (it is a reference to an engine, or a few): a local that nothing
// else can reach, so the engine's address stays in a register across user code and every buffer is
// a constant offset from it. Taken by reference, it is reloaded from memory after each opaque call
// (measured: 0.35 ns a near-empty task more on the host, 1.7 ns on the CUDA issue path).
//
// Each task passes its own entry's arguments, a constant the optimiser sees through once run() is
// inlined: run() is instantiated once per code, not once per task (when the arguments were a type
// of their own per task, each task instantiated its runner's and its engine's entry again, about
// a third of what one more executor cost to compile).
template <auto Program, std::size_t I>
consteval auto args_at() {
  return Program.entries[I].args;
}
template <auto Program, std::size_t Begin, class Runner, std::size_t... I>
CTPIPE_NOINLINE void run_block(Runner runner, std::index_sequence<I...>) {
  (runner.template run<Program.codes[detail::ix(Program.entries[Begin + I].code)]>(args_at<Program, Begin + I>(),
                                                                                   Begin + I),
   ...);
}
template <auto Program, class Runner, std::size_t... B>
void run_unrolled(Runner runner, std::index_sequence<B...>) {
  (run_block<Program, B * unroll_block>(
       runner, std::make_index_sequence<std::min(unroll_block, Program.entries.size() - B * unroll_block)>{}),
   ...);
}

/// Runs Program on `runner` (a small copyable object: see run_block): every task in order, by
/// strategy D (dispatch::unrolled or table_walk).
template <auto Program, dispatch D, class Runner>
void run_program(Runner runner) {
  static_assert(D != dispatch::automatic, "ctpipe::detail::run_program: resolve dispatch::automatic first");
  constexpr std::size_t n = Program.entries.size();
  if constexpr (n == 0) {
    return;
  } else if constexpr (D == dispatch::unrolled) {
    run_unrolled<Program>(runner, std::make_index_sequence<(n + unroll_block - 1) / unroll_block>{});
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const auto& e = Program.entries[i];
      with_index<Program.codes.size()>(
          detail::ix(e.code), [&](auto k) { runner.template run<Program.codes[decltype(k)::value]>(e.args, i); });
    }
  }
}

}  // namespace ctpipe::detail
