// Microbatches of different lengths (run-time extents) against the same microbatches padded to the
// longest (bench/README.md, "Sequences of different lengths"), on the host executor: a
// transformer-shaped block over up to 64 tokens (layers of ctpipe/layers with rows::tokens), 1F1B
// at p = 2, 8 microbatches. "padded": every microbatch at 64 tokens; "mixed": each at its own
// length (a fixed draw, 54% of the tokens); "fixed": the same model built with rows::fixed, 64
// tokens, none of the extents' machinery (what padding costs without it). Counters: ms a step, and
// the bytes that crossed between the ranks.
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/attention.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/layer_norm.hpp>

#include <cstdint>
#include <vector>

namespace {

using ctpipe::back, ctpipe::node;
using ctpipe::layers::activation, ctpipe::layers::rows;
namespace l = ctpipe::layers;
constexpr std::size_t tokens = 64, in = 32, width = 64, classes = 16;
constexpr int microbatches = 8;

template <rows R>
using block = ctpipe::model<l::dense<tokens, in, width, activation::relu, R>,        // 0
                            l::layer_norm<tokens, width, R>,                         // 1
                            l::causal_attention<tokens, width, tokens, 4, R>,        // 2
                            node<l::add<tokens, width, R>, back<1>, back<3>>,        // 3: 2 + 0
                            l::dense<tokens, width, width, activation::relu, R>,     // 4
                            l::dense<tokens, width, width, activation::none, R>,     // 5
                            node<l::add<tokens, width, R>, back<1>, back<3>>,        // 6: 5 + 3
                            l::dense<tokens, width, classes, activation::none, R>>;  // 7
template <rows R>
using loss = l::softmax_cross_entropy<tokens, classes, R>;
template <rows R>
constexpr auto stages = ctpipe::stage_bounds<block<R>, 0, 4, 8>();
template <rows R>
constexpr auto table =
    ctpipe::make_table<ctpipe::one_f_one_b(2, microbatches), ctpipe::model_crossings<block<R>, stages<R>>()>();

// Lengths drawn once (uniform in 8..64): 277 of the 512 tokens.
const std::vector<int> mixed{12, 64, 30, 47, 8, 55, 21, 40};
const std::vector<int> padded(microbatches, static_cast<int>(tokens));

template <rows R>
void step(benchmark::State& state, const std::vector<int>* extents) {
  block<R> net;
  std::uint64_t seed = 1;
  ctpipe::for_each_layer(net, [&](auto& x) {
    if constexpr (requires { x.init(seed); }) x.init(seed++);
  });
  loss<R> lo;
  std::vector<typename block<R>::input_type> inputs(microbatches);
  std::vector<typename loss<R>::target_type> targets(microbatches);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (std::size_t j = 0; j < inputs[i].v.size(); ++j)
      inputs[i].v[j] = static_cast<float>((i * 31 + j) % 17) / 17.0f - 0.5f;
    for (std::size_t t = 0; t < tokens; ++t) targets[i][t] = static_cast<int>((t + i) % classes);
  }
  ctpipe::host_executor<table<R>, block<R>, stages<R>, loss<R>> exec(net, lo);
  for (auto _ : state) {
    if constexpr (R == rows::tokens)
      benchmark::DoNotOptimize(exec.step(inputs, targets, *extents).losses.data());
    else
      benchmark::DoNotOptimize(exec.step(inputs, targets).data());
  }
  state.counters["bytes_per_step"] = static_cast<double>(exec.sent_bytes());
  state.counters["ms_per_step"] = benchmark::Counter(static_cast<double>(state.iterations()) * 1e-3,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void padded_step(benchmark::State& state) { step<rows::tokens>(state, &padded); }
void mixed_step(benchmark::State& state) { step<rows::tokens>(state, &mixed); }
void fixed_step(benchmark::State& state) { step<rows::fixed>(state, nullptr); }
// (Padded first: the report gives the others' figures as ratios to it.)
BENCHMARK(padded_step)->Name("extents/host_1f1b_p2/padded")->UseRealTime()->MinTime(1.0);
BENCHMARK(mixed_step)->Name("extents/host_1f1b_p2/mixed")->UseRealTime()->MinTime(1.0);
BENCHMARK(fixed_step)->Name("extents/host_1f1b_p2/fixed")->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
