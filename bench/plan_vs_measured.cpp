// The planner's predictions against the host executor: the quickstart's MLP (eight dense 32 -> 32
// ReLU layers and a dense 32 -> 4, softmax cross-entropy), a global batch of 64 samples, on this
// machine's 2 cores. Each layer's figures (time per sample and per op, for F, B, I and W) are
// measured first by running the layer functors alone at 8 and at 64 samples and fitting a line; the
// hand-off latency between two ranks from a naive 2-rank step (every hand-off on its critical
// path). Then each plan is predicted (ctpipe::predict) and its step measured (Google Benchmark,
// real time), and the rank correlation of the two printed. Plans of one pipeline rank run with one
// device; of two ranks, with two. The host executor has no data parallelism, so every plan here
// has one replica: the search's other axis is left to the MPI executor.
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include "plan_measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

using ctpipe::planned_schedule;
using ctpipe::layers::activation;
using ctpipe::layers::dense;

constexpr std::size_t width = 32, global_batch = 64, layers = 9;

template <std::size_t B>
using hidden = dense<B, width, width>;
template <std::size_t B>
using output = dense<B, width, 4, activation::none>;
template <std::size_t B>
using net =
    ctpipe::model<hidden<B>, hidden<B>, hidden<B>, hidden<B>, hidden<B>, hidden<B>, hidden<B>, hidden<B>, output<B>>;
template <std::size_t B>
using loss = ctpipe::layers::softmax_cross_entropy<B, 4>;

// Seconds per call of f, the best of a few rounds of n calls.
template <class F>
double seconds_per_call(F&& f, int n = 2000) {
  double best = 1e9;
  for (int round = 0; round < 7; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
    best = std::min(best, s);
  }
  return best;
}

struct op_times {
  double f, i, w, b;
};
template <class Layer>
op_times time_layer() {
  Layer l;
  l.init(7);
  typename Layer::input_type x{}, dx{};
  typename Layer::output_type y{}, dy{};
  for (std::size_t k = 0; k < x.v.size(); ++k) x.v[k] = static_cast<float>(k % 7) * 0.1f - 0.3f;
  for (std::size_t k = 0; k < dy.v.size(); ++k) dy.v[k] = static_cast<float>(k % 5) * 0.1f - 0.2f;
  l.forward(x, y);
  return {seconds_per_call([&] {
            l.forward(x, y);
            benchmark::DoNotOptimize(y);
          }),
          seconds_per_call([&] {
            l.backward_input(x, y, dy, dx);
            benchmark::DoNotOptimize(dx);
          }),
          seconds_per_call([&] {
            l.backward_weight(x, y, dy);
            benchmark::ClobberMemory();
          }),
          seconds_per_call([&] {
            l.backward(x, y, dy, dx);
            benchmark::DoNotOptimize(dx);
          })};
}

// A layer's figures from its times at 8 and at 64 samples: a line through the two.
template <template <std::size_t> class Layer>
ctpipe::layer_profile profile() {
  const op_times a = time_layer<Layer<8>>(), z = time_layer<Layer<64>>();
  auto slope = [](double t8, double t64) { return std::max(0.0, (t64 - t8) / 56.0); };
  ctpipe::layer_profile p{};
  p.forward = slope(a.f, z.f);
  p.backward_input = slope(a.i, z.i);
  p.backward_weight = slope(a.w, z.w);
  // The fixed part per op: what is left at 8 samples, averaged over F, I and W.
  p.overhead =
      std::max(0.0, ((a.f - 8 * p.forward) + (a.i - 8 * p.backward_input) + (a.w - 8 * p.backward_weight)) / 3);
  p.activation_bytes =
      static_cast<double>(sizeof(typename Layer<1>::input_type) + sizeof(typename Layer<1>::output_type));
  p.output_bytes = static_cast<double>(sizeof(typename Layer<1>::output_type));
  p.parameter_bytes = static_cast<double>(sizeof(float) * Layer<1>{}.params.size());
  return p;
}

template <std::size_t B>
struct data {
  std::vector<typename net<B>::input_type> in;
  std::vector<typename loss<B>::target_type> targets;
  explicit data(std::size_t m) : in(m), targets(m) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t b = 0; b < B; ++b) {
        targets[i][b] = static_cast<int>((i + b) % 4);
        for (std::size_t f = 0; f < width; ++f) in[i](b, f) = static_cast<float>((i + b + f) % 11) * 0.1f - 0.5f;
      }
  }
};

// One plan: its schedule, microbatch size and recomputation as types; the executor's stages are
// partition<>'s (by the layers' declared costs), checked against the planner's split.
template <auto Schedule, std::size_t B, bool Recompute>
struct plan_case {
  static constexpr auto table = ctpipe::make_table<Schedule>();
  static constexpr auto split = ctpipe::partition<net<B>, Schedule.stages()>();
  static constexpr auto stages = Recompute ? split.recompute_all() : split;
  using executor = ctpipe::host_executor<table, net<B>, stages, loss<B>>;

  static void run(benchmark::State& state) {
    net<B> model;
    int seed = 1;
    ctpipe::for_each_layer(model, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
    loss<B> l;
    const data<B> d(Schedule.info().microbatches);
    executor exec(model, l);
    for (auto _ : state) {
      auto losses = exec.step(d.in, d.targets);
      benchmark::DoNotOptimize(losses.data());
      ctpipe::for_each_layer(model, [](auto& layer) { std::fill(layer.grads.begin(), layer.grads.end(), 0.0f); });
    }
  }
};

struct entry {
  std::string name;
  ctpipe::plan_choice choice;
  std::vector<int> executor_split;
  void (*run)(benchmark::State&);
};

template <planned_schedule K, auto Schedule, bool Recompute = false>
entry make_entry(const char* name) {
  constexpr int m = Schedule.info().microbatches;
  constexpr std::size_t b = global_batch / static_cast<std::size_t>(m);
  using c = plan_case<Schedule, b, Recompute>;
  return {name,
          {K, Schedule.info().ranks, 1, m, Schedule.info().chunks, Recompute},
          std::vector<int>(c::split.first.begin(), c::split.first.end()),
          &c::run};
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // 1. The layers' figures, measured.
  std::vector<ctpipe::layer_profile> model(layers - 1, profile<hidden>());
  model.push_back(profile<output>());
  const double input_bytes = sizeof(float) * width;

  // 2. The plans. m microbatches of 64 / m samples; P = 1 or 2 ranks.
  const std::vector<entry> plans{
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(1, 1)>("gpipe p=1 m=1"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(1, 8)>("gpipe p=1 m=8"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(2, 2)>("gpipe p=2 m=2"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(2, 8)>("gpipe p=2 m=8"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4)>("1f1b p=2 m=4"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 8)>("1f1b p=2 m=8"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4), true>("1f1b p=2 m=4 recompute"),
      make_entry<planned_schedule::interleaved, ctpipe::interleaved(2, 4, 2)>("interleaved p=2 m=4 v=2"),
      make_entry<planned_schedule::interleaved, ctpipe::interleaved(2, 8, 2)>("interleaved p=2 m=8 v=2"),
      make_entry<planned_schedule::zb_h1, ctpipe::zb_h1(2, 8)>("zb_h1 p=2 m=8"),
      make_entry<planned_schedule::zb_v, ctpipe::zb_v(2, 8)>("zb_v p=2 m=8"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(2, 16)>("gpipe p=2 m=16"),
  };

  // 3. The link: the hand-off latency from a naive 2-rank step of 16 microbatches of 4, where each
  // microbatch crosses the boundary twice with nothing to overlap.
  using naive_case = plan_case<ctpipe::naive(2, 16), 4, false>;
  benchmark::RegisterBenchmark("naive p=2 m=16 (latency)", naive_case::run)->UseRealTime()->MinTime(0.3);
  for (const auto& p : plans) benchmark::RegisterBenchmark(p.name.c_str(), p.run)->UseRealTime()->MinTime(0.3);
  bench::collect reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  const ctpipe::plan_request one_device{model, {.devices = 1}, static_cast<int>(global_batch), input_bytes};
  const double naive_compute = ctpipe::predict(one_device, {planned_schedule::gpipe, 1, 1, 16, 1, false}).step_time;
  const double latency = std::max(0.0, (reporter.seconds["naive p=2 m=16 (latency)"] - naive_compute) / 32.0);

  std::printf("\nlayer figures (us): hidden F %.4f/sample I %.4f W %.4f overhead %.3f; output F %.4f/sample\n",
              model[0].forward * 1e6, model[0].backward_input * 1e6, model[0].backward_weight * 1e6,
              model[0].overhead * 1e6, model.back().forward * 1e6);
  std::printf("hand-off latency %.2f us (naive step %.1f us, its compute %.1f us)\n\n", latency * 1e6,
              reporter.seconds["naive p=2 m=16 (latency)"] * 1e6, naive_compute * 1e6);
  std::printf("| plan | predicted (us) | measured (us) | measured / predicted | split as the planner's |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::vector<double> predicted, measured;
  for (const auto& p : plans) {
    const ctpipe::plan_request q{
        model, {.devices = p.choice.ranks, .latency = latency}, static_cast<int>(global_batch), input_bytes};
    bench::plan_row(p.name, q, p.choice, p.executor_split, reporter.seconds[p.name], 1e6, 1, predicted, measured);
  }
  std::printf("\nSpearman rank correlation, predicted against measured, %zu plans: %.3f\n", plans.size(),
              bench::spearman(predicted, measured));
  return 0;
}
