// The MLP every host-executor test trains: 8 dense layers (16 -> 32 x 7 -> 4), softmax
// cross-entropy, 4 Gaussian blobs in 16 dimensions, microbatches of 4 samples.
#pragma once
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/attention.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/dropout.hpp>
#include <ctpipe/layers/layer_norm.hpp>
#include <ctpipe/layers/relu.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace test {

using ctpipe::layers::activation;
using ctpipe::layers::dense;

inline constexpr std::size_t batch = 4, features = 16, hidden = 32, classes = 4;
inline constexpr int microbatches = 12;  // a multiple of 1, 2, 3 and 4: valid for interleaved at every p

using mlp = ctpipe::model<dense<batch, features, hidden>, dense<batch, hidden, hidden>, dense<batch, hidden, hidden>,
                          dense<batch, hidden, hidden>, dense<batch, hidden, hidden>, dense<batch, hidden, hidden>,
                          dense<batch, hidden, hidden>, dense<batch, hidden, classes, activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;
using input = mlp::input_type;
using target = loss::target_type;

// The MLP again with a layer without parameters: layer 2's ReLU is a layer of its own (dense without
// activation, then layers::relu), which gives the bits of the fused layer. Every executor trains it
// (a model whose layers do not all have parameters).
using relu_mlp = ctpipe::model<dense<batch, features, hidden>, dense<batch, hidden, hidden>,
                               dense<batch, hidden, hidden, activation::none>, ctpipe::layers::relu<batch, hidden>,
                               dense<batch, hidden, hidden>, dense<batch, hidden, hidden>, dense<batch, hidden, hidden>,
                               dense<batch, hidden, hidden>, dense<batch, hidden, classes, activation::none>>;
static_assert(!ctpipe::has_parameters<relu_mlp::layer_type<3>>);

// The MLP grown with layers that keep state for their backward (a layer norm keeps its statistics,
// a causal attention over the microbatch's 4 rows its q, k, v, probabilities and, split, the
// gradients its I computed for its W) and one that draws from its context (dropout, 10%): what
// the host-layer executors' numerics sweeps train (the device executors do not stash saved state
// yet: their sweeps train the MLP above).
using stateful_mlp = ctpipe::model<dense<batch, features, hidden>, ctpipe::layers::layer_norm<batch, hidden>,
                                   dense<batch, hidden, hidden>, ctpipe::layers::causal_attention<batch, hidden>,
                                   dense<batch, hidden, hidden>, ctpipe::layers::dropout<batch, hidden, 100>,
                                   dense<batch, hidden, hidden>, dense<batch, hidden, classes, activation::none>>;
static_assert(ctpipe::has_saved_state<stateful_mlp::layer_type<1>> &&
              ctpipe::has_saved_state<stateful_mlp::layer_type<3>>);
static_assert(ctpipe::splittable_layer<stateful_mlp::layer_type<1>> &&
              ctpipe::splittable_layer<stateful_mlp::layer_type<3>>);

// The stateful MLP grown into the shape of a transformer block (what the host executors' numerics
// sweeps train): a residual around the layer norm and attention (layer 3 adds layer 0's output to
// the attention's), and one around the MLP (layer 8 adds layer 3's output to the MLP's). Split
// into stages, the residuals cross stage boundaries: skip messages, and at p >= 3 skip messages
// past whole stages. Its rows are tokens of one sequence (rows::tokens): each microbatch uses its
// own number of them, 1 to 4 (its extent), and its loss sums over them (token_loss).
// The sweeps' model (block_mlp) ends in a tied head, as a language model's does: layer 9 maps the
// hidden rows back to the input's 16 features with layer 0's weights (ctpipe::shared_with<0, ...>,
// a dense_transposed), and the loss is over those 16 logits. The untied head (a dense layer to the
// 4 classes) is the device executors' reference (they do not share parameters yet) and the
// asynchronous executor's model (which never will).
inline constexpr auto tokens = ctpipe::layers::rows::tokens;

// A host layer H computing with bf16 weights (mixed precision, ctpipe/model/compute_copy.hpp): its
// parameters() are float master weights, its compute_parameters() their bf16 copy, which every
// forward and backward widens into H's own weights before running H's code (activations and
// gradients stay float); its gradients are H's. A layer that does not split its backward.
template <class H>
struct mixed {
  using input_type = typename H::input_type;
  using output_type = typename H::output_type;
  static constexpr double cost = H::cost;
  static constexpr auto parameter_tensors = H::parameter_tensors;
  static constexpr std::size_t size = [] {
    std::size_t n = 0;
    for (const auto& t : H::parameter_tensors) n += t.size();
    return n;
  }();
  mutable H compute{};
  std::array<float, size> master{};
  std::array<ctpipe::bf16, size> copy{};

  std::span<float> parameters() { return master; }
  std::span<float> gradients() { return compute.gradients(); }
  std::span<ctpipe::bf16> compute_parameters() { return copy; }
  void init(std::uint64_t seed) {
    compute.init(seed);
    const auto w = compute.parameters();
    std::copy(w.begin(), w.end(), master.begin());
    ctpipe::write_compute_copy(*this);
  }
  template <class... A>
  requires requires(const H& h, A&&... a) { h.forward(std::forward<A>(a)...); }
  void forward(A&&... a) const {
    widen();
    compute.forward(std::forward<A>(a)...);
  }
  template <class... A>
  requires requires(H& h, A&&... a) { h.backward(std::forward<A>(a)...); }
  void backward(A&&... a) {
    widen();
    compute.backward(std::forward<A>(a)...);
  }

 private:
  void widen() const {
    const auto w = compute.parameters();
    for (std::size_t i = 0; i < size; ++i) w[i] = static_cast<float>(copy[i]);
  }
};

template <ctpipe::layers::rows R>
using class_head = dense<batch, hidden, classes, activation::none, R>;
template <ctpipe::layers::rows R>
using tied_head =
    ctpipe::shared_with<0, ctpipe::layers::dense_transposed<batch, hidden, features, activation::none, R>>;
template <ctpipe::layers::rows R, template <ctpipe::layers::rows> class Head = class_head, bool Mixed = false>
using block_mlp_of =
    ctpipe::model<dense<batch, features, hidden, activation::relu, R>,                                    // 0
                  ctpipe::layers::layer_norm<batch, hidden, R>,                                           // 1
                  ctpipe::layers::causal_attention<batch, hidden, batch, 1, R>,                           // 2
                  ctpipe::node<ctpipe::layers::add<batch, hidden, R>, ctpipe::back<1>, ctpipe::back<3>>,  // 3: 2 + 0
                  ctpipe::layers::layer_norm<batch, hidden, R>,
                  dense<batch, hidden, hidden, activation::relu, R>,  // 4, 5
                  ctpipe::layers::dropout<batch, hidden, 100, R>,     // 6
                  std::conditional_t<Mixed, mixed<dense<batch, hidden, hidden, activation::none, R>>,
                                     dense<batch, hidden, hidden, activation::none, R>>,                  // 7
                  ctpipe::node<ctpipe::layers::add<batch, hidden, R>, ctpipe::back<1>, ctpipe::back<5>>,  // 8: 7 + 3
                  Head<R>>;                                                                               // 9
using block_mlp = block_mlp_of<tokens, tied_head>;
using untied_block_mlp = block_mlp_of<tokens>;
// With layer 7 in bf16 (mixed): the host twin of the CUDA executor's sweeps' model.
using mixed_block_mlp = block_mlp_of<tokens, tied_head, true>;
static_assert(ctpipe::has_compute_copy<mixed_block_mlp::layer_type<7>>);
static_assert(block_mlp::shares[9] == 0 && ctpipe::shared_group_count<block_mlp> == 1);
// The same with rows of fixed size: the host reference of the device tests that keep rows of
// fixed size (the MPI device path's GPipe case, cuda/behaviour.cpp).
using fixed_block_mlp = block_mlp_of<ctpipe::layers::rows::fixed>;
static_assert(!block_mlp::is_chain && block_mlp::token_capacity == batch);
using token_loss = ctpipe::layers::softmax_cross_entropy<batch, classes, tokens>;
// The stateful MLP over tokens: a chain with extents (the sweeps' model is a graph).
using token_mlp = ctpipe::model<
    dense<batch, features, hidden, activation::relu, tokens>, ctpipe::layers::layer_norm<batch, hidden, tokens>,
    dense<batch, hidden, hidden, activation::relu, tokens>,
    ctpipe::layers::causal_attention<batch, hidden, batch, 1, tokens>,
    dense<batch, hidden, hidden, activation::relu, tokens>, ctpipe::layers::dropout<batch, hidden, 100, tokens>,
    dense<batch, hidden, hidden, activation::relu, tokens>, dense<batch, hidden, classes, activation::none, tokens>>;
static_assert(token_mlp::is_chain && token_mlp::token_capacity == batch);
// The dense MLP with one group of three layers that share their weights (1, 3 and 5: a group of
// any size, not only a tied pair). In 4 stages of equal layer counts its members are on three
// ranks (1F1B, p = 4), or two of them on one (interleaved, p = 2).
using hh = dense<batch, hidden, hidden>;
using group_mlp = ctpipe::model<dense<batch, features, hidden>, hh, hh, ctpipe::shared_with<1, hh>, hh,
                                ctpipe::shared_with<1, hh>, dense<batch, hidden, classes, activation::none>>;
static_assert(ctpipe::detail::group_members<group_mlp, 0> == std::array{1, 3, 5});

// A layer whose parameters() are another layer's memory, once its spans are pointed there: a
// pointer shared by hand, which the executors refuse across ranks.
struct borrowed {
  using input_type = hh::output_type;
  using output_type = hh::output_type;
  static constexpr double cost = hh::cost;
  std::span<float> w, g;
  std::span<float> parameters() { return w; }
  std::span<float> gradients() { return g; }
  void forward(const input_type& x, output_type& y) { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) { dx = dy; }
};

/// The loss a model trains with: over its output's columns (4 classes, or the tied head's 16
/// logits), summed over the tokens for a model with extents, else the mean over its rows.
template <class Model>
using loss_for =
    ctpipe::layers::softmax_cross_entropy<batch, Model::output_type::cols,
                                          (Model::token_capacity > 0) ? tokens : ctpipe::layers::rows::fixed>;

// The extents of n microbatches in step `step` of a run (microbatch i of the run is the global
// batch's first + i): 1 to `batch` tokens, mixed, and different from step to step.
inline std::vector<int> extents(int n, std::uint64_t step = 0, int first = 0) {
  std::vector<int> e(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    e[static_cast<std::size_t>(i)] =
        1 + static_cast<int>((static_cast<std::uint64_t>(first + i) * 3 + step * 5 + 1) % batch);
  return e;
}

// Model's layers split into S stages of (nearly) equal layer counts: stage s starts at layer
// s x size / S. For block_mlp at 6 and 8 stages the residuals skip whole stages.
template <class Model, std::size_t S>
consteval auto even_stages() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    return ctpipe::stage_bounds<Model, static_cast<int>(K * Model::size / S)...>();
  }
  (std::make_index_sequence<S + 1>{});
}
// The table of schedule Sched with the skip messages of Model split by Stages.
template <auto Sched, class Model, auto Stages>
consteval auto table_for() {
  return ctpipe::make_table<Sched, ctpipe::model_crossings<Model, Stages>()>();
}

// Each layer with parameters initialised from its own seed, in layer order (the same seeds as the
// fused MLP's).
template <class Model = mlp>
Model make_mlp(std::uint64_t seed = 1) {
  Model m;
  std::uint64_t k = seed;
  ctpipe::for_each_layer(m, [&](auto& l) {
    if constexpr (requires { l.init(k); }) l.init(k++);
  });
  if constexpr (ctpipe::has_shared_parameters_v<Model>) ctpipe::tie_parameters(m);  // (as the executors do)
  return m;
}

template <class Input = input>
struct basic_data_set {
  std::vector<Input> inputs;
  std::vector<target> targets;
};
using data_set = basic_data_set<>;

// Sample b of microbatch i belongs to class (i + b) % 4; its features are the class centre plus noise.
// (Input: the model's input type, a matrix of batch x features of either kind of rows.)
template <class Input = input>
basic_data_set<Input> make_data(int n = microbatches, std::uint64_t seed = 7) {
  basic_data_set<Input> d{std::vector<Input>(static_cast<std::size_t>(n)),
                          std::vector<target>(static_cast<std::size_t>(n))};
  std::uint64_t s = seed;
  auto noise = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
  };
  for (int i = 0; i < n; ++i)
    for (std::size_t b = 0; b < batch; ++b) {
      const int c = (i + static_cast<int>(b)) % static_cast<int>(classes);
      d.targets[static_cast<std::size_t>(i)][b] = c;
      for (std::size_t f = 0; f < features; ++f) {
        const float centre = (f % classes == static_cast<std::size_t>(c)) ? 1.0f : 0.0f;
        d.inputs[static_cast<std::size_t>(i)](b, f) = centre + 0.5f * noise();
      }
    }
  return d;
}

// Every gradient of the model, in layer order.
template <class M>
std::vector<float> gradients(M& m) {
  std::vector<float> g;
  ctpipe::for_each_parameter(m, [&](auto, auto gr) {
    for (float x : gr) g.push_back(x);  // (not insert: g++ 12 warns falsely on it at -O2)
  });
  return g;
}
template <class M>
std::vector<float> parameters(M& m) {
  std::vector<float> w;
  ctpipe::for_each_parameter(m, [&](auto p, auto) {
    for (float x : p) w.push_back(x);
  });
  return w;
}

// The gradients (or parameters) of the layers of pipeline rank `rank`'s stages, in layer order (in
// a bidirectional table, of both its stages: one of each pipeline).
template <auto Plan, auto Table, class M>
std::vector<float> rank_values(M& m, int rank, bool gradients) {
  std::vector<float> v;
  constexpr int chain = Table.stages() / ctpipe::directions_of(Table);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto one = [&](auto& l, int k) {
      if constexpr (ctpipe::has_parameters<std::remove_cvref_t<decltype(l)>>) {
        const auto s = static_cast<std::size_t>(Plan.stage_of_layer(k));
        if (Table.stage_rank[s] != rank && (chain == Table.stages() || Table.stage_rank[s + chain] != rank)) return;
        for (float x : gradients ? l.gradients() : l.parameters()) v.push_back(x);
      }
    };
    (one(m.template layer<K>(), static_cast<int>(K)), ...);
  }
  (std::make_index_sequence<M::size>{});
  return v;
}

// The reference of D replicas: each replica's microbatches summed in order (sequential_step), then
// the D sums added in replica order. Returns the global batch's losses; the gradients are in `m`.
// `step`: the step's number for the layers' context (replica r's microbatches are r x per_replica on).
// `extents`: the global batch's (none: a model of fixed shapes). `chains`: 2 for a bidirectional
// table (dualpipe), whose two pipelines each take half of a replica's microbatches: each half is
// summed in order, and the replica's sum is the first half's plus the second's.
template <class Model, class Loss, class Input>
std::vector<double> reference_step(Model& m, Loss& l, const basic_data_set<Input>& d, int replicas, int per_replica,
                                   std::uint64_t step = 0, std::span<const int> extents = {}, int chains = 1) {
  std::vector<double> losses(d.inputs.size());
  std::vector<float> total;
  const int per_chain = per_replica / chains;
  for (int r = 0; r < replicas; ++r) {
    std::vector<float> replica;
    for (int c = 0; c < chains; ++c) {
      const auto first = static_cast<std::size_t>(r * per_replica + c * per_chain),
                 n = static_cast<std::size_t>(per_chain);
      ctpipe::sequential_step(m, l, std::span<const Input>(d.inputs).subspan(first, n),
                              std::span<const target>(d.targets).subspan(first, n),
                              extents.empty() ? extents : extents.subspan(first, n),
                              std::span<double>(losses).subspan(first, n), {step, static_cast<int>(first)});
      const std::vector<float> g = gradients(m);
      if (c == 0)
        replica = g;
      else
        for (std::size_t i = 0; i < g.size(); ++i) replica[i] += g[i];
    }
    if (r == 0)
      total = replica;
    else
      for (std::size_t i = 0; i < replica.size(); ++i) total[i] += replica[i];
  }
  std::size_t i = 0;
  ctpipe::for_each_parameter(m, [&](auto, auto g) {
    for (float& x : g) x = total[i++];
  });
  return losses;
}

}  // namespace test
