// Zero-bubble schedules on layers that keep their state: 4 transformer-shaped blocks (layer norm,
// causal attention with 2 heads and its output projection, layer norm, an MLP 32 -> 128 -> 32; no
// residuals: ctpipe's models are chains so far), microbatches of 4 sequences of 32 tokens (128
// rows of width 32), 8 microbatches, p = 2 ranks: the step time of ZB-H1 and ZB-V against 1F1B on
// the same work (and one thread's sequential step), and each schedule's measured makespan against
// the table replayed with the measured task times (compare_measured). The attention's W reads the
// gradients its I kept, the layer norms' backward their saved statistics: no W runs a forward.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/attention.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/layer_norm.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

namespace {

using namespace ctpipe::layers;
constexpr std::size_t rows = 128, width = 32, tokens = 32, heads = 2, mlp = 128;
constexpr int microbatches = 8;

using block_layers = std::tuple<layer_norm<rows, width>, causal_attention<rows, width, tokens, heads>,
                                dense<rows, width, width, activation::none>, layer_norm<rows, width>,
                                dense<rows, width, mlp>, dense<rows, mlp, width, activation::none>>;
template <class... A, class... B>
auto join(std::tuple<A...>, std::tuple<B...>) -> std::tuple<A..., B...>;
using four_blocks = decltype(join(join(block_layers{}, block_layers{}), join(block_layers{}, block_layers{})));
template <class Tuple>
struct model_of;
template <class... L>
struct model_of<std::tuple<L...>> {
  using type = ctpipe::model<L...>;
};
using net = model_of<four_blocks>::type;
using loss = softmax_cross_entropy<rows, width>;

net make_net() {
  net m;
  std::uint64_t seed = 1;
  ctpipe::for_each_layer(m, [&](auto& l) {
    if constexpr (requires { l.init(seed); }) l.init(seed++);
  });
  return m;
}

struct data {
  std::vector<net::input_type> inputs = std::vector<net::input_type>(microbatches);
  std::vector<loss::target_type> targets = std::vector<loss::target_type>(microbatches);
  data() {
    std::uint64_t s = 7;
    for (auto& x : inputs)
      for (float& v : x.v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
      }
    for (auto& t : targets)
      for (std::size_t r = 0; r < rows; ++r) t[r] = static_cast<int>((r * 7 + 3) % width);
  }
};

template <auto Schedule>
void schedule_step(benchmark::State& state) {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr auto stages = ctpipe::partition<net, table.stages()>();
  net model = make_net();
  loss l;
  const data d;
  ctpipe::host_executor<table, net, stages, loss> exec(model, l);
  exec.step(d.inputs, d.targets);  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(d.inputs, d.targets).data());
  // The measured makespan against the replay of the same table with the measured task times.
  exec.record_steps(true);
  double measured = 0.0, replayed = 0.0;
  for (int k = 0; k < 5; ++k) {
    exec.step(d.inputs, d.targets);
    const auto c = ctpipe::compare_measured(table, exec.recorded_step());
    measured += c.measured;
    replayed += c.replayed;
  }
  state.counters["measured_over_replayed"] = measured / replayed;
  state.counters["activation_bytes_rank0"] = static_cast<double>(decltype(exec)::activation_bytes()[0]);
}

void sequential(benchmark::State& state) {
  net model = make_net();
  loss l;
  const data d;
  std::vector<double> losses(microbatches);
  for (auto _ : state) {
    ctpipe::sequential_step(model, l, std::span<const net::input_type>(d.inputs),
                            std::span<const loss::target_type>(d.targets), std::span<double>(losses));
    benchmark::DoNotOptimize(losses.data());
  }
}

}  // namespace

BENCHMARK(sequential)->Name("transformer/sequential")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(schedule_step<ctpipe::one_f_one_b(2, microbatches)>)
    ->Name("transformer/1f1b_p2")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(schedule_step<ctpipe::zb_h1(2, microbatches)>)
    ->Name("transformer/zb_h1_p2")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(schedule_step<ctpipe::zb_v(2, microbatches)>)
    ->Name("transformer/zb_v_p2")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
