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
// The residual, a layer a stage: layer 0's output skips stage 1 (a crossing from stage 0 to 2); with
// layers 0 and 1 on one stage, nothing skips; a chain has no crossings.
static_assert(ctpipe::model_crossings<residual, ctpipe::stage_bounds<residual, 0, 1, 2, 3, 4>()>() ==
              std::array{ctpipe::crossing{0, 2, hb}});
static_assert(ctpipe::model_crossings<residual, ctpipe::stage_bounds<residual, 0, 2, 3, 4>()>().empty());
static_assert(ctpipe::model_crossings<test::mlp, ctpipe::partition<test::mlp, 3>()>().empty());
// The partitioner counts what a stage sends, skip connections included: cutting inside the
// residual (after layer 1) sends two tensors, layer 1's output and layer 0's around it; a brute
// force over every 3-stage split, with each stage but the last also costing its bytes (each tensor
// once), agrees.
constexpr double per_byte = 4.0;
constexpr double brute_force_residual() {
  double best = 1e300;
  for (int a = 1; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      const int cut[4] = {0, a, b, 4};
      double worst = 0;
      for (int s = 0; s < 3; ++s) {
        double sum = 0, sent = 0;
        for (int l = cut[s]; l < cut[s + 1]; ++l) sum += residual::costs[static_cast<std::size_t>(l)];
        for (std::size_t e = 0; e < residual::edges.size(); ++e) {  // each tensor once
          const auto& x = residual::edges[e];
          bool counted = false;
          for (std::size_t f = 0; f < e; ++f)
            counted = counted || (residual::edges[f].producer == x.producer && residual::edges[f].output == x.output &&
                                  residual::edges[f].consumer >= cut[s + 1]);
          sent += !counted && x.producer >= cut[s] && x.producer < cut[s + 1] && x.consumer >= cut[s + 1] ? x.bytes : 0;
        }
        worst = sum > worst ? sum : worst;
        worst = s < 2 && per_byte * sent > worst ? per_byte * sent : worst;
      }
      best = worst < best ? worst : best;
    }
  return best;
}
static_assert(ctpipe::partition<residual, 3>(0.0, per_byte).max_stage_cost == brute_force_residual());
static_assert(ctpipe::partition<residual, 2>(0.0, 1e9).first != std::array<int, 3>{0, 2, 4});
// The table of a schedule over those stages carries the crossing's messages and verifies.
static_assert(
    ctpipe::check<
        ctpipe::make_table<ctpipe::one_f_one_b(4, 4),
                           ctpipe::model_crossings<residual, ctpipe::stage_bounds<residual, 0, 1, 2, 3, 4>()>()>()>());
// Its plan: the crossing joins ranks 0 and 2, and carries the step's 4 values and 4 gradients.
constexpr auto residual_plan = ctpipe::make_execution_plan<
    ctpipe::make_table<ctpipe::one_f_one_b(4, 4),
                       ctpipe::model_crossings<residual, ctpipe::stage_bounds<residual, 0, 1, 2, 3, 4>()>()>()>();
static_assert(residual_plan.skips[0].remote && residual_plan.skips[0].values == 4 &&
              residual_plan.skips[0].gradients == 4);

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
  // The forward pass alone (the reference for evaluate and predict): the losses a step gives,
  // the same outputs from both, and the gradients left as they were.
  ctpipe::sequential_step(g, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                          std::span<double>(lg));
  const std::vector<float> grads = test::gradients(g);
  std::vector<double> eg(d.inputs.size()), ef(d.inputs.size());
  ctpipe::sequential_evaluate(g, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                              std::span<double>(eg));
  ctpipe::sequential_evaluate(f, l, std::span<const test::input>(d.inputs), std::span<const test::target>(d.targets),
                              std::span<double>(ef));
  CHECK(eg == lg);
  CHECK(ef == lg);
  CHECK(test::bitwise_equal(grads, test::gradients(g)));
  using output = typename Graph::output_type;
  std::vector<output> yg(d.inputs.size()), yf(d.inputs.size());
  ctpipe::sequential_predict(g, std::span<const test::input>(d.inputs), std::span<output>(yg));
  ctpipe::sequential_predict(f, std::span<const test::input>(d.inputs), std::span<output>(yf));
  CHECK(yg == yf);
  CHECK(!(yg[0] == output{}));
  CHECK_THROWS_WITH_AS(
      ctpipe::sequential_evaluate(g, l, std::span<const test::input>(d.inputs),
                                  std::span<const test::target>(d.targets).first(1), std::span<double>(eg)),
      ("ctpipe::sequential_evaluate: inputs (" + std::to_string(d.inputs.size()) + "), targets (1) and losses (" +
       std::to_string(d.inputs.size()) + ") must have the same size")
          .c_str(),
      std::invalid_argument);
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
// Its crossings, a layer a stage: layer 0's output skips to stages 2 and 3, layer 1's to stage 3.
constexpr std::size_t tb = sizeof(traced);
static_assert(ctpipe::model_crossings<summing, ctpipe::stage_bounds<summing, 0, 1, 2, 3, 4>()>() ==
              std::array{ctpipe::crossing{0, 2, tb}, ctpipe::crossing{0, 3, tb}, ctpipe::crossing{1, 3, tb}});
// Layers 2 and 3 on one stage: layer 0's output crosses to it once, for both readers; layer 1's is
// the neighbour's message.
static_assert(ctpipe::model_crossings<summing, ctpipe::stage_bounds<summing, 0, 1, 2, 4>()>() ==
              std::array{ctpipe::crossing{0, 2, tb}});
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
