// The planner's stage split against partition<>'s on the GPT example (bench/README.md, "The
// planner's split on the GPT"), side by side in one run:
//
//   bash bench/gpt_split.sh     (the example measures its layers, `ctpipe plan --emit-header`
//                                writes the plan, this program is built with it and run)
//
// The example's GPT (context 64, width 64, 4 heads, 2 blocks), a step of M microbatches of 16 / M
// sequences, 1F1B on 2 ranks (host executor, OpenBLAS at one thread per rank) with the stages of:
// partition<>, by the layers' declared costs; partition<> with the loss's declared cost on the last
// stage; and the emitted header's, by the measured times, the loss counted in the head. Beside them,
// the same M microbatches on one rank: the table's bound for 1F1B under perfect balance is
// (M + 1) / 2M of it. Real time, no optimizer (the steps' gradients are zeroed between them).
// The header comes from -DCTPIPE_GPT_SPLIT_HEADER="path" (the script's), else bench/samples/gpt_split_plan.hpp
// (written by the script on the 2-core VM, so that CI compiles this program).
#include "gpt.hpp"  // examples/gpt: the model's shape

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>

#ifdef CTPIPE_GPT_SPLIT_HEADER
#include CTPIPE_GPT_SPLIT_HEADER
#else
#include "samples/gpt_split_plan.hpp"
#endif

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

namespace {

using gpt_example::shape;
constexpr int global_batch = 16;  // sequences a step, as the model file's plans
constexpr int m = gpt_split::microbatches;
static_assert(global_batch % m == 0 && gpt_split::microbatch_size * m == global_batch && gpt_split::ranks == 2);
using g = ctpipe::layers::gpt<ctpipe::layers::gpt_shape{shape.vocab, shape.tokens, global_batch / m, shape.width,
                                                        shape.heads, shape.blocks}>;
using model = typename g::model;

template <auto Schedule, auto Stages>
void step(benchmark::State& state) {
  using set_fn = void (*)(int);  // one OpenBLAS thread per rank
  if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<model, Stages>()>();
  auto net = std::make_unique<model>();
  g::init(*net, 1);
  typename g::loss loss;
  std::vector<typename g::input_type> in(m);
  std::vector<typename g::target_type> targets(m);
  const std::vector<int> extents(m, static_cast<int>(g::rows));
  std::uint64_t s = 11;
  for (int i = 0; i < m; ++i)
    for (std::size_t r = 0; r < g::rows; ++r) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      in[i].v[r] = static_cast<std::int32_t>((s >> 33) % shape.vocab);
      targets[i][r] = static_cast<int>((s >> 17) % shape.vocab);
    }
  ctpipe::host_executor<table, model, Stages, typename g::loss> exec(*net, loss);
  for (int k = 0; k < 3; ++k) exec.step(in, targets, extents);  // warm-up
  for (auto _ : state) {
    auto losses = exec.step(in, targets, extents);
    benchmark::DoNotOptimize(losses);
  }
  state.counters["first_stage_layers"] = Stages.layers(0);
  // The ranks' balance over 5 recorded steps: the busiest rank's compute over the mean.
  exec.record_steps(true);
  double balance = 0;
  for (int k = 0; k < 5; ++k) {
    exec.step(in, targets, extents);
    const ctpipe::step_comparison c = ctpipe::compare_measured(table, exec.recorded_step());
    const double mean = std::accumulate(c.busy.begin(), c.busy.end(), 0.0) / static_cast<double>(c.busy.size());
    balance += *std::max_element(c.busy.begin(), c.busy.end()) / mean / 5;
  }
  state.counters["busiest_over_mean"] = balance;
}

constexpr auto planned = gpt_split::stages<model>();

#ifndef CTPIPE_BENCH_BUILD_ONLY  // (CI compiles the planner's case alone: bench/CMakeLists.txt)
constexpr auto declared = ctpipe::partition<model, 2>();
constexpr auto with_loss = ctpipe::partition<model, 2, typename g::loss>();
BENCHMARK(step<ctpipe::one_f_one_b(1, m), ctpipe::partition<model, 1>()>)
    ->Name("gpt_split/one_rank")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(step<ctpipe::one_f_one_b(2, m), declared>)
    ->Name("gpt_split/1f1b_p2/partition")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(step<ctpipe::one_f_one_b(2, m), with_loss>)
    ->Name("gpt_split/1f1b_p2/partition_with_loss")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
#endif
BENCHMARK(step<gpt_split::schedule, planned>)
    ->Name("gpt_split/1f1b_p2/planner")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
