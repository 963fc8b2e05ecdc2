// A frozen prefix (PipeTransformer): a stage plan from freeze_partition starts past layer 0; stage
// 0's rank runs the frozen layers forward only. Losses and the active layers' gradients equal the
// sequential run's, bitwise; the frozen layers' gradients stay untouched; no activation of a frozen
// layer is stashed; the prefix's output cache gives the same results without running the prefix.
#include "support/numerics.hpp"

#include <vector>

namespace {

// The active layers' gradients of m (layers first.. of the model), in order.
template <class M>
std::vector<float> active_gradients(M& m, int first) {
  std::vector<float> g;
  int k = 0;
  ctpipe::for_each_parameter(m, [&](auto, auto gr) {
    if (k++ >= first)
      for (float x : gr) g.push_back(x);
  });
  return g;
}

template <auto Table, auto Stages>
void frozen_against_sequential() {
  constexpr int f = Stages.frozen();
  test::mlp seq = test::make_mlp(), pipe = test::make_mlp();
  test::loss l;
  const auto d = test::make_data(Table.params.microbatches);
  std::vector<double> seq_losses(d.inputs.size());
  ctpipe::host_executor<Table, test::mlp, Stages, test::loss> exec(pipe, l);
  for (int step = 0; step < 5; ++step) {
    ctpipe::sequential_step(seq, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<double>(seq_losses));
    const auto losses = exec.step(d.inputs, d.targets);
    for (std::size_t i = 0; i < seq_losses.size(); ++i) REQUIRE(losses[i] == seq_losses[i]);
    REQUIRE(test::bitwise_equal(active_gradients(seq, f), active_gradients(pipe, f)));
    // The frozen layers: no gradient (zeroed by the step, never accumulated).
    int k = 0;
    ctpipe::for_each_parameter(pipe, [&](auto, auto gr) {
      if (k++ < f)
        for (float x : gr) REQUIRE(x == 0.0f);
    });
    // Train the active layers only, both sides.
    k = 0;
    ctpipe::for_each_parameter(seq, [&](auto w, auto g) {
      if (k++ >= f) ctpipe::sgd{0.02}(0, w, g);
    });
    k = 0;
    ctpipe::for_each_parameter(pipe, [&](auto w, auto g) {
      if (k++ >= f) ctpipe::sgd{0.02}(0, w, g);
    });
  }
  CHECK(test::bitwise_equal(test::parameters(seq), test::parameters(pipe)));
}

constexpr auto table2 = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
constexpr auto table3 = ctpipe::make_table<ctpipe::one_f_one_b(3, test::microbatches)>();
constexpr auto frozen2 = ctpipe::freeze_partition<test::mlp, 2>(4);
constexpr auto frozen3 = ctpipe::freeze_partition<test::mlp, 3>(2);
static_assert(frozen2.frozen() == 4 && frozen2.first[2] == 8);
static_assert(frozen3.frozen() == 2 && frozen3.first[3] == 8);
// The prefix loads stage 0 with a third of its cost: with half the layers frozen, 2 ranks split
// the active half so that stage 0 holds fewer active layers than stage 1 does.
static_assert(frozen2.layers(0) < frozen2.layers(1));
// No activation of a frozen layer is kept: the stash of stage 0 holds its own layers' tensors only.
using full_exec = ctpipe::host_executor<table2, test::mlp, ctpipe::partition<test::mlp, 2>(), test::loss>;
using frozen_exec = ctpipe::host_executor<table2, test::mlp, frozen2, test::loss>;
static_assert(frozen_exec::activation_bytes()[0] < full_exec::activation_bytes()[0]);

}  // namespace

TEST_CASE("frozen prefix: bitwise equal to the sequential run on the active layers") {
  SUBCASE("p = 2, 4 layers frozen") { frozen_against_sequential<table2, frozen2>(); }
  SUBCASE("p = 3, 2 layers frozen") { frozen_against_sequential<table3, frozen3>(); }
}

TEST_CASE("frozen prefix: its output cache stands in for the prefix, bitwise") {
  test::mlp a = test::make_mlp(), b = test::make_mlp();
  test::loss l;
  const auto d = test::make_data(test::microbatches);
  frozen_exec ea(a, l), eb(b, l);
  using prefix = frozen_exec::prefix_type;
  std::vector<prefix> cache(test::microbatches);
  std::vector<prefix*> out;
  std::vector<const prefix*> in;
  for (auto& c : cache) {
    out.push_back(&c);
    in.push_back(&c);
  }
  ea.use_prefix_cache({}, out);  // the first epoch fills the cache
  const auto first = ea.step(d.inputs, d.targets);
  const std::vector<double> filled(first.begin(), first.end());
  // From the cache, with inputs that would give other results if the prefix ran.
  auto scrambled = d.inputs;
  for (auto& x : scrambled) x(0, 0) += 1.0f;
  eb.use_prefix_cache(in, {});
  const auto cached = eb.step(scrambled, d.targets);
  CHECK(std::vector<double>(cached.begin(), cached.end()) == filled);
  CHECK(test::bitwise_equal(test::gradients(a), test::gradients(b)));
  CHECK_THROWS_AS(eb.use_prefix_cache(std::span<const prefix* const>(in.data(), 3), {}), std::invalid_argument);
}
