// Models shaped like graphs (model/graph.hpp, model/tensors.hpp): the edges a model lists, a chain
// told from a graph, and sequential training of a residual model bitwise equal to the same
// arithmetic written as one fused layer (the skip's gradient: the join's contribution first, then
// the layer's), with the residual around a layer and around the model's input.
#include <ctpipe/layers/add.hpp>

#include "support/numerics.hpp"  // bitwise_equal, gradients

namespace {

using ctpipe::back, ctpipe::from, ctpipe::node;
using test::batch, test::features, test::hidden, test::classes;
using m_f = ctpipe::layers::matrix<batch, features>;
using m_h = ctpipe::layers::matrix<batch, hidden>;

// y = x + dense(x), as one layer: what a residual model computes, written out.
template <std::size_t Width>
struct fused_residual {
  using inner = test::dense<batch, Width, Width>;
  using input_type = typename inner::input_type;
  using output_type = typename inner::output_type;
  static constexpr double cost = inner::cost;
  inner d;
  void init(std::uint64_t seed) { d.init(seed); }
  std::span<float> parameters() { return d.parameters(); }
  std::span<float> gradients() { return d.gradients(); }
  void forward(const input_type& x, output_type& y) const {
    output_type t;
    d.forward(x, t);
    for (std::size_t i = 0; i < t.v.size(); ++i) y.v[i] = t.v[i] + x.v[i];
  }
  void backward(const input_type& x, const output_type&, const output_type& dy, input_type& dx) {
    output_type t;
    input_type dd;
    d.forward(x, t);
    d.backward(x, t, dy, dd);
    for (std::size_t i = 0; i < dx.v.size(); ++i) dx.v[i] = dy.v[i] + dd.v[i];
  }
};

using add_h = ctpipe::layers::add<batch, hidden>;
using head = test::dense<batch, hidden, classes, test::activation::none>;
// A residual around layer 1: layer 2 adds layer 1's output and layer 0's.
using residual = ctpipe::model<test::dense<batch, features, hidden>, test::dense<batch, hidden, hidden>,
                               node<add_h, back<1>, back<2>>, head>;
using residual_fused = ctpipe::model<test::dense<batch, features, hidden>, fused_residual<hidden>, head>;
// A residual around the model's input: layer 1 reads layer 0's output and the model's input.
using input_residual =
    ctpipe::model<test::dense<batch, features, features>, node<ctpipe::layers::add<batch, features>, from<0>, from<-1>>,
                  test::dense<batch, features, hidden>, head>;
using input_residual_fused = ctpipe::model<fused_residual<features>, test::dense<batch, features, hidden>, head>;

constexpr std::size_t fb = sizeof(m_f), hb = sizeof(m_h), cb = sizeof(ctpipe::layers::matrix<batch, classes>);
static_assert(residual::edges == std::array{ctpipe::edge{-1, 0, 0, 0, fb}, ctpipe::edge{0, 0, 1, 0, hb},
                                            ctpipe::edge{1, 0, 2, 0, hb}, ctpipe::edge{0, 0, 2, 1, hb},
                                            ctpipe::edge{2, 0, 3, 0, hb}});
static_assert(input_residual::edges == std::array{ctpipe::edge{-1, 0, 0, 0, fb}, ctpipe::edge{0, 0, 1, 0, fb},
                                                  ctpipe::edge{-1, 0, 1, 1, fb}, ctpipe::edge{1, 0, 2, 0, fb},
                                                  ctpipe::edge{2, 0, 3, 0, hb}});
static_assert(!residual::is_chain && !input_residual::is_chain);
static_assert(test::mlp::is_chain && test::stateful_mlp::is_chain && residual_fused::is_chain);
// A chain's edges: each layer's input from the one before (the first from the model's input).
static_assert(residual_fused::edges ==
              std::array{ctpipe::edge{-1, 0, 0, 0, fb}, ctpipe::edge{0, 0, 1, 0, hb}, ctpipe::edge{1, 0, 2, 0, hb}});
// node<L> without sources is L; back<1> alone is the chain's own edge.
static_assert(ctpipe::model<test::dense<batch, features, hidden>, node<head>>::is_chain);
static_assert(ctpipe::model<test::dense<batch, features, hidden>, node<head, back<1>>>::is_chain);
static_assert(cb > 0);

// Trains the graph model and its fused twin side by side: losses, gradients and parameters equal
// to the bit at every step.
template <class Graph, class Fused>
void train_alike() {
  Graph g = test::make_mlp<Graph>();
  Fused f = test::make_mlp<Fused>();
  test::loss l;
  const test::data_set d = test::make_data(test::microbatches);
  std::vector<double> lg(d.inputs.size()), lf(d.inputs.size());
  for (int step = 0; step < 5; ++step) {
    ctpipe::sequential_step(g, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<double>(lg));
    ctpipe::sequential_step(f, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                            std::span<double>(lf));
    REQUIRE(lg == lf);
    REQUIRE(test::bitwise_equal(test::gradients(g), test::gradients(f)));
    ctpipe::sgd_step(g, 0.05);
    ctpipe::sgd_step(f, 0.05);
  }
  CHECK(test::bitwise_equal(test::parameters(g), test::parameters(f)));
}

}  // namespace

TEST_CASE("graph model: a residual around a layer trains as the fused layer does, bitwise") {
  train_alike<residual, residual_fused>();
}
TEST_CASE("graph model: a residual around the model's input trains as the fused layer does, bitwise") {
  train_alike<input_residual, input_residual_fused>();
}

// The order in which a tensor read by several layers sums their gradients: the backward meets the
// last reader first (its contribution is copied), then the others, each added; within one layer, its
// input parts in order. A tensor type that lists the contributions it was given shows it.
namespace {
struct traced {
  std::array<int, 4> ids{};
  int n = 0;
  traced& operator+=(const traced& o) {
    for (int i = 0; i < o.n; ++i) ids[static_cast<std::size_t>(n++)] = o.ids[static_cast<std::size_t>(i)];
    return *this;
  }
  bool operator==(const traced&) const = default;
};
traced source_dy;  // what the source layer's backward received
struct source_layer {
  using input_type = traced;
  using output_type = traced;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    source_dy = dy;
    dx = {};
  }
};
template <int Id>
struct reader {
  using input_type = traced;
  using output_type = traced;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y = x; }
  void backward(const input_type&, const output_type&, const output_type&, input_type& dx) const {
    dx = traced{{Id}, 1};
  }
};
struct join3 {
  using input_type = ctpipe::tensors<traced, traced, traced>;
  using output_type = traced;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y = std::get<0>(x); }
  void backward(const input_type&, const output_type&, const output_type&, input_type& dx) const {
    dx = input_type{traced{{10}, 1}, traced{{11}, 1}, traced{{12}, 1}};
  }
};
struct traced_loss {
  using target_type = int;
  double operator()(const traced&, const int&, traced& dy) const {
    dy = {};
    return 0.0;
  }
};
// Layer 0's output is read by layers 1 and 2 and by layer 3's third part.
using summing =
    ctpipe::model<source_layer, reader<1>, node<reader<2>, back<2>>, node<join3, back<2>, back<1>, back<3>>>;
static_assert(summing::edges.size() == 6 && !summing::is_chain);
}  // namespace

TEST_CASE("graph model: a tensor read by several layers gets their gradients summed, the last reader's first") {
  summing m;
  traced_loss l;
  const std::array<traced, 1> in{};
  const std::array<int, 1> t{};
  std::array<double, 1> losses{};
  ctpipe::sequential_step(m, l, std::span<const traced>(in), std::span<const int>(t), std::span<double>(losses));
  // join3's part 2 (copied), then reader<2>'s, then reader<1>'s (added).
  CHECK(source_dy == traced{{12, 2, 1}, 3});
}
