// The GPT's pipelined step against its own one-rank step on this machine (bench/README.md, "GPT:
// scaling"): bench/gpt_pipe.cpp's "small" GPT (width 256, 4 heads, context 128, 4 blocks; 4
// sequences a microbatch), m microbatches a step, on 1 rank and on p = 2 ranks (1F1B, ZB-H1,
// ZB-V), with AdamW's update in the step. Counters, from compare_measured over 5 recorded steps:
// the measured makespan over the table replayed with the measured task times (what the executor
// adds beyond the table), each rank's compute over the mean (balance), and the replay over the
// mean compute (what the table's bubble costs at these task times); and, for 1F1B, the bound the
// table predicts under perfect balance, (m + p - 1) / (m p) of the one-rank step.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

namespace {

constexpr ctpipe::layers::gpt_shape shape{
    .vocab = 96, .tokens = 128, .batch = 4, .width = 256, .heads = 4, .blocks = 4};
using net = ctpipe::layers::gpt<shape>;

template <int M>
struct batch {
  std::vector<net::input_type> inputs = std::vector<net::input_type>(M);
  std::vector<net::target_type> targets = std::vector<net::target_type>(M);
  std::vector<int> extents = std::vector<int>(M, static_cast<int>(net::rows));
  batch() {
    std::uint64_t s = 11;
    for (int i = 0; i < M; ++i)
      for (std::size_t r = 0; r < net::rows; ++r) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        inputs[i].v[r] = static_cast<std::int32_t>((s >> 33) % shape.vocab);
        targets[i][r] = static_cast<int>((s >> 17) % shape.vocab);
      }
  }
};

template <auto Schedule, int M>
void step(benchmark::State& state) {
  using set_fn = void (*)(int);  // one OpenBLAS thread per rank
  if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
  constexpr auto stages = ctpipe::partition<net::model, Schedule.stages()>();
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<net::model, stages>()>();
  auto model = std::make_unique<net::model>();
  net::init(*model, 1);
  net::loss loss;
  ctpipe::host_executor<table, net::model, stages, net::loss> exec(*model, loss);
  ctpipe::optimizer opt(*model, ctpipe::adamw{.lr = 1e-4}, {.max_norm = 1.0});
  const batch<M> b;
  const auto one = [&] {
    const auto l = exec.step(b.inputs, b.targets, b.extents);
    opt.step(1.0 / static_cast<double>(l.total_tokens()));
  };
  one();  // warm-up
  for (auto _ : state) one();
  exec.record_steps(true);
  double measured = 0, replayed = 0, balance = 0, bubble = 0;
  for (int k = 0; k < 5; ++k) {
    one();
    const ctpipe::step_comparison c = ctpipe::compare_measured(table, exec.recorded_step());
    measured += c.measured;
    replayed += c.replayed;
    const double mean = std::accumulate(c.busy.begin(), c.busy.end(), 0.0) / static_cast<double>(c.busy.size());
    balance += *std::max_element(c.busy.begin(), c.busy.end()) / mean / 5;
    bubble += c.replayed / mean / 5;
  }
  state.counters["measured_over_replayed"] = measured / replayed;
  state.counters["busiest_over_mean"] = balance;
  state.counters["replayed_over_mean_busy"] = bubble;
  constexpr int p = table.ranks();
  if constexpr (p > 1) state.counters["bound_1f1b"] = static_cast<double>(M + p - 1) / static_cast<double>(M * p);
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(M * net::rows), benchmark::Counter::kIsIterationInvariantRate);
}

#define CTPIPE_GPT_STEP(M)                      \
  BENCHMARK(step<ctpipe::one_f_one_b(1, M), M>) \
      ->Name("gpt/m:" #M "/1rank")              \
      ->Unit(benchmark::kMillisecond)           \
      ->UseRealTime();                          \
  BENCHMARK(step<ctpipe::one_f_one_b(2, M), M>) \
      ->Name("gpt/m:" #M "/1f1b_p2")            \
      ->Unit(benchmark::kMillisecond)           \
      ->UseRealTime();                          \
  BENCHMARK(step<ctpipe::zb_h1(2, M), M>)       \
      ->Name("gpt/m:" #M "/zb_h1_p2")           \
      ->Unit(benchmark::kMillisecond)           \
      ->UseRealTime();                          \
  BENCHMARK(step<ctpipe::zb_v(2, M), M>)->Name("gpt/m:" #M "/zb_v_p2")->Unit(benchmark::kMillisecond)->UseRealTime()

CTPIPE_GPT_STEP(8);
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt: CI compiles one m)
CTPIPE_GPT_STEP(4);
CTPIPE_GPT_STEP(16);
#endif

}  // namespace

BENCHMARK_MAIN();
