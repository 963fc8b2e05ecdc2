// Dispatch cost per task on one rank (issue: benchmarks, item 1), three programs over the same
// 1F1B table of 2m near-empty tasks (a counter increment kept alive with DoNotOptimize):
//  (a) ctpipe's host executor (one rank thread; the step wakes it and waits for it);
//  (b) a hand-written loop calling the same functors in the same order on the calling thread;
//  (c) a run-time interpreter of the same table: a std::vector of instructions, a switch, and
//      std::function callbacks, as Python-side runtimes and instruction-stream executors work.
#include "tick.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace {

using bench::tick;
using bench::count_loss;
using net = bench::one_layer;

template <int M>
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(1, M)>();


template <int M>
void executor(benchmark::State& state) {
  net model;
  count_loss loss;
  std::vector<tick::input_type> in(M);
  std::vector<int> targets(M);
  ctpipe::host_executor<table<M>, net, ctpipe::partition<net, 1>(), count_loss> exec(model, loss);
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(in, targets).data());
  bench::per_task_counters(state, 2.0 * M);
}

// What a person writes for this table: F then B for each microbatch, with the same buffers.
template <int M>
void hand_written(benchmark::State& state) {
  net model;
  count_loss loss;
  std::vector<tick::input_type> in(M), stash(M), dx(M);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  tick::output_type y{}, dy{};
  auto& layer = model.layer<0>();
  for (auto _ : state) {
    for (int mb = 0; mb < M; ++mb) {
      stash[static_cast<std::size_t>(mb)] = in[static_cast<std::size_t>(mb)];
      layer.forward(stash[static_cast<std::size_t>(mb)], y);
      losses[static_cast<std::size_t>(mb)] = loss(y, targets[static_cast<std::size_t>(mb)], dy);
      layer.backward(stash[static_cast<std::size_t>(mb)], y, dy, dx[static_cast<std::size_t>(mb)]);
    }
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

// An interpreter: the table as data, walked at run time.
template <int M>
void interpreter(benchmark::State& state) {
  net model;
  count_loss loss;
  struct instruction {
    ctpipe::op_kind op;
    int microbatch;
  };
  std::vector<instruction> program;
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(1, M));
  for (const auto& x : t.program(0)) program.push_back({x.op, x.microbatch});
  std::vector<tick::input_type> in(M), stash(M), dx(M);
  std::vector<tick::output_type> out(M);
  std::vector<int> targets(M);
  std::vector<double> losses(M);
  auto& layer = model.layer<0>();
  std::function<void(int)> forward = [&](int mb) {
    stash[static_cast<std::size_t>(mb)] = in[static_cast<std::size_t>(mb)];
    layer.forward(stash[static_cast<std::size_t>(mb)], out[static_cast<std::size_t>(mb)]);
  };
  std::function<void(int)> backward = [&](int mb) {
    tick::output_type dy{};
    losses[static_cast<std::size_t>(mb)] = loss(out[static_cast<std::size_t>(mb)], targets[static_cast<std::size_t>(mb)], dy);
    layer.backward(stash[static_cast<std::size_t>(mb)], out[static_cast<std::size_t>(mb)], dy, dx[static_cast<std::size_t>(mb)]);
  };
  for (auto _ : state) {
    for (const instruction& i : program) {
      switch (i.op) {
        case ctpipe::op_kind::forward: forward(i.microbatch); break;
        case ctpipe::op_kind::backward: backward(i.microbatch); break;
        default: break;
      }
    }
    benchmark::DoNotOptimize(losses.data());
  }
  bench::per_task_counters(state, 2.0 * M);
}

}  // namespace

#define CTPIPE_DISPATCH(M)                                                                  \
  BENCHMARK(executor<M>)->Name("dispatch/a_executor/tasks=" #M "x2")->UseRealTime();      \
  BENCHMARK(hand_written<M>)->Name("dispatch/b_hand_written/tasks=" #M "x2")->UseRealTime(); \
  BENCHMARK(interpreter<M>)->Name("dispatch/c_interpreter/tasks=" #M "x2")->UseRealTime();
CTPIPE_DISPATCH(8)
CTPIPE_DISPATCH(32)
CTPIPE_DISPATCH(128)
CTPIPE_DISPATCH(512)
CTPIPE_DISPATCH(2048)

BENCHMARK_MAIN();
