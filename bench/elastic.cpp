// Elastic freezing (bench/README.md, "Elastic freezing"): an elastic_trainer step of 8 layers that
// sleep (F = 200 us, B = 400 us each, 4,096 float parameters, SGD) on 4 devices (threads; more than
// the cores, so the layers sleep), 8 microbatches a step, before and after freezing half the layers:
//  - before/4x1:              nothing frozen, 4 stages, 1 replica;
//  - frozen_half/4x1:         4 layers frozen, the pipeline keeps 4 stages (the active layers
//                             re-balanced; the prefix runs forward on stage 0 every step);
//  - frozen_half/2x2:         4 layers frozen, AutoPipe's re-partition: 2 stages x 2 replicas
//                             (the prefix still runs every step);
//  - frozen_half/2x2_cached:  the same with the prefix's output from the cache (samples repeat).
// Counter: ms_per_step (median).
#include "timed.hpp"

#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>
#include <vector>

namespace {

using layer = bench::weighted<4096>;
using net = bench::timed_net<8, layer>;
using running = ctpipe::elastic_plan<net, 4, 4, 8, std::array{0, 4}>;       // the prefix at a third of its cost
using cached = ctpipe::elastic_plan<net, 4, 4, 8, std::array{0, 4}, true>;  // the prefix from the cache
static_assert(running::points[1].ranks == 4 && cached::points[1].ranks == 2 && cached::points[1].replicas == 2);

template <class Plan, int Frozen, bool Samples>
void elastic_step(benchmark::State& state) {
  bench::durations record;
  net model;
  ctpipe::for_each_layer(model, [&](layer& l) {
    l.forward_time = std::chrono::microseconds(200);
    l.input_time = std::chrono::microseconds(200);
    l.weight_time = std::chrono::microseconds(200);
    l.sleep = true;
    l.record = &record;
  });
  bench::copy_loss loss;
  ctpipe::sgd opt{1e-6};
  ctpipe::elastic_trainer<Plan, bench::copy_loss, ctpipe::sgd> train(model, loss, opt);
  if (Frozen > 0) train.freeze(Frozen);
  std::vector<layer::input_type> in(8);
  std::vector<int> targets(8);
  std::vector<std::size_t> ids(8);
  std::iota(ids.begin(), ids.end(), 0);
  const auto samples = Samples ? std::span<const std::size_t>(ids) : std::span<const std::size_t>();
  train.step(in, targets, samples);  // threads started; the cache filled
  std::vector<double> steps;
  for (auto _ : state) {
    const auto start = bench::clock_type::now();
    benchmark::DoNotOptimize(train.step(in, targets, samples).data());
    steps.push_back(std::chrono::duration<double, std::milli>(bench::clock_type::now() - start).count());
  }
  std::sort(steps.begin(), steps.end());
  state.counters["ms_per_step"] = steps[steps.size() / 2];
  state.counters["ranks"] = train.point().ranks;
  state.counters["replicas"] = train.point().replicas;
}

}  // namespace

#define CTPIPE_ELASTIC_BENCH(fn, name) \
  BENCHMARK(fn)->Name("elastic/sleep/" name)->UseRealTime()->Unit(benchmark::kMillisecond);
CTPIPE_ELASTIC_BENCH((elastic_step<running, 0, false>), "before/4x1")
CTPIPE_ELASTIC_BENCH((elastic_step<running, 4, false>), "frozen_half/4x1")
CTPIPE_ELASTIC_BENCH((elastic_step<cached, 4, false>), "frozen_half/2x2")
CTPIPE_ELASTIC_BENCH((elastic_step<cached, 4, true>), "frozen_half/2x2_cached")

BENCHMARK_MAIN();
