// Dispatch cost per task on one rank (bench/README.md, "Dispatch"). Programs over the same 1F1B
// table of 2m near-empty tasks (a counter increment kept alive with DoNotOptimize):
//  (a) ctpipe's host executor, dispatch::unrolled and dispatch::table_walk (rank 0 runs on the
//      calling thread, so one rank means no other thread);
//  (b) a hand-written straight-line program calling the same functors in the same order with the
//      same buffer slots, one statement per task (written by bench/gen_straight_line.cpp);
//      and, for reference, the loop a person would write instead;
//  (c) a run-time interpreter of the same table: a std::vector of instructions, a switch, and
//      std::function callbacks, as Python-side runtimes and instruction-stream executors work.
#include "dispatch_sizes.hpp"
#include "straight_line.hpp"
#include "tick.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace {

using bench::count_loss;
using bench::tick;
using net = bench::one_layer;

template <int M, ctpipe::dispatch D>
void executor(benchmark::State& state) {
  net model;
  count_loss loss;
  std::vector<tick::input_type> in(M);
  std::vector<int> targets(M);
  ctpipe::host_executor<bench::dispatch_table<M>, net, ctpipe::partition<net, 1>(), count_loss, D> exec(model, loss);
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(in, targets).data());
  bench::per_task_counters(state, 2.0 * M);
}

template <int M, void (*Program)(bench::straight_line_state&)>
void straight_line(benchmark::State& state) {
  std::vector<tick::input_type> in(M);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  bench::straight_line_state s;
  s.in = in.data();
  s.targets = targets.data();
  s.losses = losses.data();
  for (auto _ : state) {
    Program(s);
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

// The loop a person would write for this table: F then B for each microbatch, one stash slot.
template <int M>
void hand_loop(benchmark::State& state) {
  tick layer;
  count_loss loss;
  std::vector<tick::input_type> in(M);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  tick::input_type x{}, dx{};
  tick::output_type y{}, dy{};
  for (auto _ : state) {
    for (std::size_t mb = 0; mb < M; ++mb) {
      x = in[mb];
      layer.forward(x, y);
      losses[mb] = loss(y, targets[mb], dy);
      layer.backward(x, y, dy, dx);
    }
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

// An interpreter: the table as data, walked at run time, each op a std::function.
template <int M>
void interpreter(benchmark::State& state) {
  tick layer;
  count_loss loss;
  struct instruction {
    ctpipe::op_kind op;
    int microbatch;
    int slot;
  };
  std::vector<instruction> program;
  constexpr auto plan = ctpipe::make_execution_plan<bench::dispatch_table<M>>();
  for (int i = 0; i < plan.table.length[0]; ++i)
    program.push_back({plan.table.programs[0][static_cast<std::size_t>(i)].op,
                       plan.table.programs[0][static_cast<std::size_t>(i)].microbatch,
                       plan.slots[0][static_cast<std::size_t>(i)].stash});
  std::vector<tick::input_type> in(M), x(4);
  std::vector<tick::output_type> y(4);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  tick::input_type dx{};
  tick::output_type dy{};
  std::function<void(int, int)> forward = [&](int mb, int k) {
    x[static_cast<std::size_t>(k)] = in[static_cast<std::size_t>(mb)];
    layer.forward(x[static_cast<std::size_t>(k)], y[static_cast<std::size_t>(k)]);
  };
  std::function<void(int, int)> backward = [&](int mb, int k) {
    losses[static_cast<std::size_t>(mb)] =
        loss(y[static_cast<std::size_t>(k)], targets[static_cast<std::size_t>(mb)], dy);
    layer.backward(x[static_cast<std::size_t>(k)], y[static_cast<std::size_t>(k)], dy, dx);
  };
  for (auto _ : state) {
    for (const instruction& i : program) {
      switch (i.op) {
        case ctpipe::op_kind::forward:
          forward(i.microbatch, i.slot);
          break;
        case ctpipe::op_kind::backward:
          backward(i.microbatch, i.slot);
          break;
        default:
          break;
      }
    }
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

}  // namespace

#define CTPIPE_DISPATCH(M)                                                                                \
  BENCHMARK(executor<M, ctpipe::dispatch::unrolled>)->Name("dispatch/a_unrolled/tasks:" #M "x2");         \
  BENCHMARK(executor<M, ctpipe::dispatch::table_walk>)->Name("dispatch/a_table_walk/tasks:" #M "x2");     \
  BENCHMARK(straight_line<M, bench::straight_line_##M>)->Name("dispatch/b_straight_line/tasks:" #M "x2"); \
  BENCHMARK(hand_loop<M>)->Name("dispatch/b_loop/tasks:" #M "x2");                                        \
  BENCHMARK(interpreter<M>)->Name("dispatch/c_interpreter/tasks:" #M "x2");
CTPIPE_DISPATCH(8)
CTPIPE_DISPATCH(32)
CTPIPE_DISPATCH(128)
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt)
CTPIPE_DISPATCH(512)
CTPIPE_DISPATCH(2048)
#endif

BENCHMARK_MAIN();
