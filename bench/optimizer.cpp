// What a step of ctpipe::optimizer costs on one core, per parameter, against ctpipe::sgd_step (the
// plain loop every executor's users had before): a model of 4 dense layers of 512 x 512 (1.05 M
// float parameters, 8 MB of parameters and gradients, beyond the L2 cache), the same gradients
// set again (untimed) before each step.
//  - sgd_step: w -= lr g, one pass over w and g;
//  - optimizer<sgd> without the non-finite check: the same arithmetic through the rule and the
//    per-tensor loop (what the optimizer adds by itself);
//  - optimizer<sgd> as made by default (the check on): plus the global norm, one more pass over g;
//  - optimizer<sgd> clipped at a norm the gradients exceed: plus the scaling pass;
//  - optimizer<sgd_momentum>, optimizer<adamw>, each clipped: their state's passes.
// Each benchmark reports ns per parameter; compare them side by side, from one run.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>

namespace {

using layer = ctpipe::layers::dense<1, 512, 512>;
using net = ctpipe::model<layer, layer, layer, layer>;
constexpr double parameters = 4.0 * (512 * 512 + 512);

// The same gradients every time (clipping scales them in place).
void set_gradients(net& m) {
  int i = 0;
  ctpipe::for_each_parameter(m, [&](auto, auto gr) {
    for (float& x : gr) x = 1e-3f * static_cast<float>(i++ % 97 - 48);
  });
}

net& model() {
  static net* m = [] {
    auto* n = new net;
    unsigned seed = 1;
    ctpipe::for_each_layer(*n, [&](auto& l) { l.init(seed++); });
    set_gradients(*n);
    return n;
  }();
  return *m;
}

void per_parameter(benchmark::State& state) {
  state.counters["ns_per_parameter"] = benchmark::Counter(parameters * static_cast<double>(state.iterations()),
                                                          benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void sgd_step(benchmark::State& state) {
  net& m = model();
  for (auto _ : state) {
    state.PauseTiming();  // (as the others do)
    set_gradients(m);
    state.ResumeTiming();
    ctpipe::sgd_step(m, 1e-9);
    benchmark::ClobberMemory();
  }
  per_parameter(state);
}

template <class Rule>
void optimizer_step(benchmark::State& state, Rule rule, ctpipe::clipping clip) {
  net& m = model();
  ctpipe::optimizer opt(m, rule, clip);
  for (auto _ : state) {
    state.PauseTiming();
    set_gradients(m);
    state.ResumeTiming();
    benchmark::DoNotOptimize(opt.step());
    benchmark::ClobberMemory();
  }
  per_parameter(state);
}

// (The gradients' global norm is about 28, set again before each step: clipped at 1, every step
// scales them. The learning rates keep the weights near where they started.)
void sgd_unchecked(benchmark::State& s) { optimizer_step(s, ctpipe::sgd{.lr = 1e-9}, {.skip_nonfinite = false}); }
void sgd_checked(benchmark::State& s) { optimizer_step(s, ctpipe::sgd{.lr = 1e-9}, {}); }
void sgd_clipped(benchmark::State& s) { optimizer_step(s, ctpipe::sgd{.lr = 1e-9}, {.max_norm = 1.0}); }
void momentum_clipped(benchmark::State& s) { optimizer_step(s, ctpipe::sgd_momentum{.lr = 1e-9}, {.max_norm = 1.0}); }
void adamw_clipped(benchmark::State& s) { optimizer_step(s, ctpipe::adamw{.lr = 1e-9}, {.max_norm = 1.0}); }

}  // namespace

BENCHMARK(sgd_step);
BENCHMARK(sgd_unchecked);
BENCHMARK(sgd_checked);
BENCHMARK(sgd_clipped);
BENCHMARK(momentum_clipped);
BENCHMARK(adamw_clipped);
BENCHMARK_MAIN();
