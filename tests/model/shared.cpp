// Layers that share parameters (ctpipe::shared_with): the group tables a model declares, starting
// the copies equal, the members' sum in layer order, and the sequential reference against the model
// that keeps one matrix for the group (equal within float rounding, not to the bit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include <ctpipe/layers/embedding.hpp>

#include "support/mlp.hpp"
#include "support/numerics.hpp"  // bitwise_equal

namespace {

using ctpipe::shared_with;
using d8 = ctpipe::layers::dense<2, 8, 8>;

// A group of three over layers 1, 3 and 4; layer 0's weights are shared by none.
using three = ctpipe::model<d8, d8, d8, shared_with<1, d8>, shared_with<1, d8>>;
static_assert(three::shares == std::array{-1, -1, -1, 1, 1});
static_assert(ctpipe::shared_group_count<three> == 1 && ctpipe::has_shared_parameters_v<three>);
static_assert(ctpipe::detail::group_members<three, 0> == std::array{1, 3, 4});
static_assert(ctpipe::detail::group_of<three>(4) == 0 && ctpipe::detail::group_of<three>(1) == 0 &&
              ctpipe::detail::group_of<three>(0) == -1);
// A shared_with around a node: the node keeps its sources.
using two = ctpipe::model<d8, d8, shared_with<0, ctpipe::node<d8, ctpipe::back<2>>>,
                          ctpipe::node<ctpipe::layers::add<2, 8>, ctpipe::back<2>, ctpipe::back<1>>>;
static_assert(!ctpipe::has_shared_parameters_v<test::mlp> && ctpipe::shared_group_count<test::mlp> == 0);
// dense shares its weights, not its bias; dense_transposed lays them out as the layer it ties with.
static_assert(ctpipe::declares_shared_parameters<d8>);
static_assert(std::is_same_v<test::block_mlp::layer_type<9>,
                             ctpipe::layers::dense<4, 32, 16, ctpipe::layers::activation::none,
                                                   ctpipe::layers::rows::tokens, ctpipe::layers::weights::in_by_out>>);

TEST_CASE("tie_parameters copies the group's first layer's weights into the other members, not the biases") {
  three m = test::make_mlp<three>();  // (make_mlp ties: undo it for layer 4, to see tie_parameters do it)
  std::fill(m.layer<4>().params.begin(), m.layer<4>().params.end(), 5.0f);
  ctpipe::tie_parameters(m);
  for (std::size_t i = 0; i < 64; ++i) {
    CHECK(m.layer<3>().params[i] == m.layer<1>().params[i]);
    CHECK(m.layer<4>().params[i] == m.layer<1>().params[i]);
  }
  CHECK(m.layer<4>().params[64] == 5.0f);  // the bias is the layer's own
  CHECK(m.layer<0>().params[0] != m.layer<1>().params[0]);
}

TEST_CASE("sum_shared_gradients adds the members in layer order and gives every member the sum") {
  three m;
  auto g1 = m.layer<1>().gradients(), g3 = m.layer<3>().gradients(), g4 = m.layer<4>().gradients();
  // Chosen so that the order shows: (1e8 + -1e8) + 1 = 1, but 1e8 + (-1e8 + 1) = 0 in float.
  g1[0] = 1e8f, g3[0] = -1e8f, g4[0] = 1.0f;
  g1[64] = 7.0f;  // a bias: not shared
  ctpipe::sum_shared_gradients(m);
  CHECK(g1[0] == 1.0f);
  CHECK(g3[0] == 1.0f);
  CHECK(g4[0] == 1.0f);
  CHECK(g1[64] == 7.0f);
  CHECK(g3[64] == 0.0f);
}

struct wide {  // shares 72 floats where a dense<2, 8, 8> shares 64
  using input_type = d8::output_type;
  using output_type = d8::output_type;
  static constexpr double cost = 1;
  std::array<float, 72> w{}, g{};
  std::span<float> parameters() { return w; }
  std::span<float> gradients() { return g; }
  void forward(const input_type& x, output_type& y) { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) { dx = dy; }
};

// What a layer shares, counted from its type where it says: dense's weights (shared_parameter_count),
// a layer that shares all its parameters and names them (parameter_tensors: layer norm's weight and
// bias); 0 where only the run knows (wide: std::array spans, no tensors named). A count known on
// both sides that differs is a compile-time error (compile_fail/model_shared_sizes.cpp); with one
// side unknown, the executors and tie_parameters check at run time, below.
static_assert(ctpipe::detail::shared_element_count<d8>() == 64);
static_assert(ctpipe::detail::shared_element_count<ctpipe::layers::layer_norm<2, 8>>() == 16);
static_assert(ctpipe::detail::shared_element_count<ctpipe::layers::embedding<3, 2, 5, 4>>() == 20);
static_assert(ctpipe::detail::shared_element_count<wide>() == 0);

TEST_CASE("shared groups of different lengths are refused, naming both layers") {
  ctpipe::model<d8, shared_with<0, wide>> m;
  CHECK_THROWS_WITH_AS(ctpipe::tie_parameters(m), doctest::Contains("layers 0 and 1 share parameters"),
                       std::invalid_argument);
}

// The tied head as a model with one matrix would run it: the head reads layer 0's weights and adds
// its weight gradient into layer 0's, microbatch by microbatch, in the order of the sequential pass
// (head first, then layer 0). Its own parameters are its bias.
struct one_matrix_head {
  using inner_t = ctpipe::layers::dense_transposed<test::batch, test::hidden, test::features,
                                                   ctpipe::layers::activation::none, test::tokens>;
  using input_type = inner_t::input_type;
  using output_type = inner_t::output_type;
  static constexpr double cost = inner_t::cost;
  inner_t inner;
  std::span<float> w, gw;  // layer 0's weights and their gradients: the one matrix
  std::span<float> parameters() { return inner.parameters().subspan(test::hidden * test::features); }
  std::span<float> gradients() { return inner.gradients().subspan(test::hidden * test::features); }
  void forward(const ctpipe::context& c, const input_type& x, output_type& y) {
    std::copy(w.begin(), w.end(), inner.shared_parameters().begin());
    inner.forward(c, x, y);
  }
  void backward(const ctpipe::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    const auto g = inner.shared_gradients();
    std::fill(g.begin(), g.end(), 0.0f);
    inner.backward(c, x, y, dy, dx);
    for (std::size_t i = 0; i < g.size(); ++i) gw[i] += g[i];
  }
};
template <ctpipe::layers::rows>
using one_matrix = one_matrix_head;
using one_matrix_mlp = test::block_mlp_of<test::tokens, one_matrix>;

TEST_CASE("the tied sequential reference and the one-matrix model agree within float rounding over 20 steps") {
  using tied = test::block_mlp;
  tied a = test::make_mlp<tied>();
  one_matrix_mlp b = test::make_mlp<one_matrix_mlp>();
  b.layer<9>().w = b.layer<0>().shared_parameters();
  b.layer<9>().gw = b.layer<0>().shared_gradients();
  CHECK(test::bitwise_equal(std::vector<float>(a.layer<0>().params.begin(), a.layer<0>().params.end()),
                            std::vector<float>(b.layer<0>().params.begin(), b.layer<0>().params.end())));
  test::loss_for<tied> l;
  const auto d = test::make_data<tied::input_type>(test::microbatches);
  std::vector<double> la(d.inputs.size()), lb(d.inputs.size());
  double worst_loss = 0.0, worst_weight = 0.0, first = 0.0, last = 0.0;
  bool differ = false;
  for (int step = 0; step < 20; ++step) {
    const std::vector<int> e = test::extents(test::microbatches, static_cast<std::uint64_t>(step));
    const ctpipe::step_origin o{static_cast<std::uint64_t>(step), 0};
    ctpipe::sequential_step(a, l, std::span<const tied::input_type>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<const int>(e), std::span<double>(la), o);
    ctpipe::sequential_step(b, l, std::span<const tied::input_type>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<const int>(e), std::span<double>(lb), o);
    // The tied members hold the same sum; the one matrix holds a sum rounded in another order.
    CHECK(test::bitwise_equal(std::vector<float>(a.layer<0>().grads.begin(), a.layer<0>().grads.begin() + 512),
                              std::vector<float>(a.layer<9>().grads.begin(), a.layer<9>().grads.begin() + 512)));
    double total = 0.0;
    for (std::size_t i = 0; i < la.size(); ++i) {
      worst_loss = std::max(worst_loss, std::abs(la[i] - lb[i]) / (1.0 + std::abs(lb[i])));
      total += la[i];
    }
    (step == 0 ? first : last) = total;
    int tokens = 0;
    for (const int x : e) tokens += x;
    const double rate = 0.02 * static_cast<double>(e.size()) / tokens;  // per token, as the sweeps step
    ctpipe::sgd_step(a, rate);
    ctpipe::sgd_step(b, rate);
  }
  const auto wa = a.layer<0>().shared_parameters(), wb = b.layer<0>().shared_parameters();
  for (std::size_t i = 0; i < wa.size(); ++i) {
    worst_weight = std::max(worst_weight, static_cast<double>(std::abs(wa[i] - wb[i])) / (1.0 + std::abs(wb[i])));
    differ = differ || wa[i] != wb[i];
  }
  const auto h = a.layer<9>().shared_parameters();
  CHECK(std::equal(wa.begin(), wa.end(), h.begin()));  // the copies stayed equal
  MESSAGE("tied vs one matrix after 20 steps: worst relative loss difference " << worst_loss << ", weight "
                                                                               << worst_weight);
  CHECK(worst_loss < 1e-4);
  CHECK(worst_weight < 1e-4);
  CHECK(last < 0.5 * first);
  CHECK(differ);  // (the two orders do round differently: else this test would show nothing)
}

TEST_CASE("a shared_with around a node keeps the node's sources") {
  static_assert(two::edges[2] == ctpipe::edge{0, 0, 2, 0, sizeof(d8::output_type), 0});
  static_assert(ctpipe::shared_group_count<two> == 1 && ctpipe::detail::group_members<two, 0> == std::array{0, 2});
  static_assert(two::shares == std::array{-1, -1, 0, -1});
  CHECK(!two::is_chain);
}

}  // namespace
