// Asynchronous pipelines against the flushed one (bench/README.md, "Asynchronous pipelines"): the
// same work, stages of one timed layer each (F = 200 us, B = 400 us, 4,096 float parameters, SGD),
// m = 8 microbatches a step:
//  - flushed 1F1B (host_executor): a step, then sgd_step on the model (one update per step);
//  - PipeDream with weight stashing (async_executor): a step, an update per microbatch per stage;
//  - PipeDream-2BW (async_executor): a step, an update per step.
// p = 2 spins (the development machine has 2 cores); p = 4 sleeps (more ranks than cores).
// Counters: ms_per_step (median step), and for the asynchronous ones the drain after the run. And
// recording's cost on layers that take no time (async_empty).
#include "timed.hpp"

#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

namespace {

using bench::clock_type;
using bench::copy_loss;
using layer = bench::weighted<4096>;
constexpr int microbatches = 8;

template <int P>
using net = bench::timed_net<P, layer>;

template <int P, bool Sleep>
net<P> make_net(bench::durations& record) {
  net<P> model;
  ctpipe::for_each_layer(model, [&](layer& l) {
    l.forward_time = std::chrono::microseconds(200);
    l.input_time = std::chrono::microseconds(200);
    l.weight_time = std::chrono::microseconds(200);
    l.sleep = Sleep;
    l.record = &record;
  });
  return model;
}

void report(benchmark::State& state, std::vector<double>& steps) {
  std::sort(steps.begin(), steps.end());
  state.counters["ms_per_step"] = steps[steps.size() / 2];
}

// Runs `step` once per iteration (after one untimed step) and records each step's wall time.
template <class Step>
void timed_steps(benchmark::State& state, Step&& step) {
  step();
  std::vector<double> steps;
  for (auto _ : state) {
    const auto start = clock_type::now();
    step();
    steps.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
  }
  report(state, steps);
}

template <int P, bool Sleep>
void flushed(benchmark::State& state) {
  bench::durations record;
  auto model = make_net<P, Sleep>(record);
  copy_loss loss;
  std::vector<layer::input_type> in(microbatches);
  std::vector<int> targets(microbatches);
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(P, microbatches)>();
  ctpipe::host_executor<table, net<P>, ctpipe::partition<net<P>, P>(), copy_loss> exec(model, loss);
  timed_steps(state, [&] {
    benchmark::DoNotOptimize(exec.step(in, targets).data());
    ctpipe::sgd_step(model, 1e-3);
  });
}

template <ctpipe::async_schedule S, bool Sleep>
void async(benchmark::State& state) {
  bench::durations record;
  auto model = make_net<S.ranks, Sleep>(record);
  copy_loss loss;
  ctpipe::sgd opt{1e-3};
  std::vector<layer::input_type> in(microbatches);
  std::vector<int> targets(microbatches);
  using exec_t =
      ctpipe::async_executor<S, net<S.ranks>, ctpipe::partition<net<S.ranks>, S.ranks>(), copy_loss, ctpipe::sgd>;
  exec_t exec(model, loss, opt);
  timed_steps(state, [&] { benchmark::DoNotOptimize(exec.step(in, targets).data()); });
  const auto start = clock_type::now();
  exec.finish();
  state.counters["drain_ms"] = std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

// Recording's cost (record_steps): PipeDream-2BW at p = 2 on layers that take no time, a step
// recorded or not (off: one test per rank and step, as the host executor's). us_per_step: the
// median step.
template <bool Recorded>
void async_empty(benchmark::State& state) {
  bench::durations record;
  auto model = make_net<2, false>(record);
  ctpipe::for_each_layer(model, [](layer& l) { l.forward_time = l.input_time = l.weight_time = {}; });
  copy_loss loss;
  ctpipe::sgd opt{1e-3};
  std::vector<layer::input_type> in(microbatches);
  std::vector<int> targets(microbatches);
  constexpr auto S = ctpipe::pipedream_2bw(2, microbatches);
  ctpipe::async_executor<S, net<2>, ctpipe::partition<net<2>, 2>(), copy_loss, ctpipe::sgd> exec(model, loss, opt);
  if constexpr (Recorded) [](auto& e) { e.record_steps(true); }(exec);  // (generic: a tree without it compiles)
  std::vector<double> steps;
  exec.step(in, targets);
  for (auto _ : state) {
    const auto start = clock_type::now();
    benchmark::DoNotOptimize(exec.step(in, targets).data());
    steps.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
  }
  std::sort(steps.begin(), steps.end());
  state.counters["us_per_step"] = steps[steps.size() / 2];
  exec.finish();
}

}  // namespace

BENCHMARK(async_empty<false>)->Name("async/empty/pipedream_2bw/p:2/m:8")->UseRealTime();
BENCHMARK(async_empty<true>)->Name("async/empty/pipedream_2bw/p:2/m:8/recorded")->UseRealTime();
#define CTPIPE_ASYNC_BENCH(fn, name) BENCHMARK(fn)->Name("async/" name)->UseRealTime()->Unit(benchmark::kMillisecond);
CTPIPE_ASYNC_BENCH((flushed<2, false>), "spin/1f1b_flushed/p:2/m:8")
CTPIPE_ASYNC_BENCH((async<ctpipe::pipedream(2, microbatches), false>), "spin/pipedream/p:2/m:8")
CTPIPE_ASYNC_BENCH((async<ctpipe::pipedream_2bw(2, microbatches), false>), "spin/pipedream_2bw/p:2/m:8")
CTPIPE_ASYNC_BENCH((flushed<4, true>), "sleep/1f1b_flushed/p:4/m:8")
CTPIPE_ASYNC_BENCH((async<ctpipe::pipedream(4, microbatches), true>), "sleep/pipedream/p:4/m:8")
CTPIPE_ASYNC_BENCH((async<ctpipe::pipedream_2bw(4, microbatches), true>), "sleep/pipedream_2bw/p:4/m:8")

BENCHMARK_MAIN();
