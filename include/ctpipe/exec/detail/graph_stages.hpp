// The wiring of a model that is not a chain, split into stages: which tensors each stage receives
// from each earlier stage (one message per pair of stages: its neighbour's, or a skip message), and
// which gradient terms it sends back. Plain constexpr over Model::edges and the stage plan; the host
// compute (exec/detail/host_compute.hpp) runs a graph stage from these.
//
// The order of a gradient's sum is sequential_step's: an output read by several layers gets their
// contributions in the order the backward meets them (the last reader first, a reader's input parts
// in order), the first copied, each next one added. A stage that reads a tensor of an earlier stage
// sends back, per such tensor, the sum of its own readers' contributions where it is the farthest
// stage that reads it (its sum is the start of the whole sum), and each of its readers' contributions
// apart where a later stage reads it too (a partial sum there would round differently); the
// producing stage adds what it receives, farthest stage first, then its own readers'. So a pipelined
// step is bitwise equal to sequential_step whatever the partition.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/stages.hpp>
#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::detail {

/// Several tensors sent as one message: an aggregate (trivially copyable where its parts are, so a
/// process can send it as bytes), read with bundle_part<I>.
template <class... T>
struct bundle {};
template <class H, class... T>
struct bundle<H, T...> {
  H head{};
  [[no_unique_address]] bundle<T...> tail{};
};
template <std::size_t I, class B>
constexpr auto& bundle_part(B& b) noexcept {
  if constexpr (I == 0)
    return b.head;
  else
    return bundle_part<I - 1>(b.tail);
}

/// Where an input part of a layer comes from in its stage's F, and where its gradient goes in a B or
/// I: the tensor (a layer's output part, or the model's input part), read in the layer's own stage or
/// from a message, and whether its gradient starts the sum it goes to.
struct part_link {
  int edge = 0;         // in Model::edges
  int layer = -1;       // the layer whose output it is; -1: the model's input
  int output = 0;       // that layer's output part, or the model's input part
  int stage = -1;       // read from a message: the stage that sends it (and takes its gradient); else -1
  int wire = 0;         // in that message, its wire
  int term = 0;         // in the gradient message back (a layer's output only), its term
  bool starts = false;  // its gradient starts the sum it goes to (copied there), else is added to it
};

/// What flows between the stages of Model split by Stages (a stage plan whose first stage starts at
/// layer 0). Edges are numbered as in Model::edges (consumer by consumer, input part by input part).
template <class Model, auto Stages>
struct graph_wiring {
  static constexpr int edge_count = static_cast<int>(Model::edges.size());
  static constexpr const edge& at(int i) { return Model::edges[static_cast<std::size_t>(i)]; }
  // The stage that makes a tensor (the model's input: stage 0) and the one that reads it.
  static constexpr int producer_stage(const edge& e) { return e.producer < 0 ? 0 : Stages.stage_of_layer(e.producer); }
  static constexpr int consumer_stage(const edge& e) { return Stages.stage_of_layer(e.consumer); }
  static constexpr bool same_tensor(const edge& x, const edge& y) {
    return x.producer == y.producer && x.output == y.output;
  }
  // x's contribution comes before y's in the backward's order.
  static constexpr bool earlier(const edge& x, const edge& y) {
    return x.consumer > y.consumer || (x.consumer == y.consumer && x.input < y.input);
  }

  /// The edge that carries input part `input` of layer `layer`.
  static constexpr int edge_of(int layer, int input) {
    for (int i = 0; i < edge_count; ++i)
      if (at(i).consumer == layer && at(i).input == input) return i;
    return 0;
  }

  // ---- values: the wires of message (a -> b), a < b ------------------------------------------
  // Edge i opens a wire of its message: the first edge into its consumer's stage that reads its tensor.
  static constexpr bool opens_wire(int i) {
    const edge& e = at(i);
    for (int j = 0; j < i; ++j)
      if (same_tensor(at(j), e) && consumer_stage(at(j)) == consumer_stage(e)) return false;
    return true;
  }
  static constexpr bool crosses(const edge& e) {
    return e.producer < 0 ? consumer_stage(e) > 0 : producer_stage(e) < consumer_stage(e);
  }
  /// How many tensors message (a -> b) carries.
  static constexpr int wire_count(int a, int b) {
    int n = 0;
    for (int i = 0; i < edge_count; ++i)
      n += crosses(at(i)) && producer_stage(at(i)) == a && consumer_stage(at(i)) == b && opens_wire(i);
    return n;
  }
  /// The edge that opens wire w of message (a -> b).
  static constexpr int wire_edge(int a, int b, int w) {
    for (int i = 0; i < edge_count; ++i)
      if (crosses(at(i)) && producer_stage(at(i)) == a && consumer_stage(at(i)) == b && opens_wire(i) && w-- == 0)
        return i;
    return 0;
  }
  /// The wire of its message that edge i (a crossing edge) reads.
  static constexpr int wire_of(int i) {
    const edge& e = at(i);
    const int a = producer_stage(e), b = consumer_stage(e);
    for (int w = 0, n = wire_count(a, b); w < n; ++w)
      if (same_tensor(at(wire_edge(a, b, w)), e)) return w;
    return 0;
  }

  // ---- gradients: the terms of message (b -> a) ----------------------------------------------
  // Stage b is the farthest that reads e's tensor.
  static constexpr bool farthest(const edge& e) {
    for (int j = 0; j < edge_count; ++j)
      if (same_tensor(at(j), e) && consumer_stage(at(j)) > consumer_stage(e)) return false;
    return true;
  }
  // The readers of e's tensor in e's consumer's stage that come before e in the backward's order.
  static constexpr int readers_before(const edge& e) {
    int n = 0;
    for (int j = 0; j < edge_count; ++j)
      n += same_tensor(at(j), e) && consumer_stage(at(j)) == consumer_stage(e) && earlier(at(j), e);
    return n;
  }
  static constexpr int readers_in_stage(const edge& e) {
    int n = 0;
    for (int j = 0; j < edge_count; ++j) n += same_tensor(at(j), e) && consumer_stage(at(j)) == consumer_stage(e);
    return n;
  }
  // The gradient terms of the wire edge i opens: none for the model's input, one sum where its stage
  // is the farthest reader, else one per reader.
  static constexpr int wire_terms(int i) {
    const edge& e = at(i);
    return e.producer < 0 ? 0 : farthest(e) ? 1 : readers_in_stage(e);
  }
  /// How many gradient terms message (b -> a) carries.
  static constexpr int term_count(int b, int a) {
    int n = 0;
    for (int w = 0, k = wire_count(a, b); w < k; ++w) n += wire_terms(wire_edge(a, b, w));
    return n;
  }
  /// The term of its gradient message that edge i (a crossing edge from a layer) writes.
  static constexpr int term_of(int i) {
    const edge& e = at(i);
    const int a = producer_stage(e), b = consumer_stage(e), w = wire_of(i);
    int t = 0;
    for (int v = 0; v < w; ++v) t += wire_terms(wire_edge(a, b, v));
    return t + (farthest(e) ? 0 : readers_before(e));
  }
  /// An edge whose tensor term t of message (b -> a) is the gradient of.
  static constexpr int term_edge(int b, int a, int t) {
    for (int w = 0, k = wire_count(a, b); w < k; ++w) {
      const int n = wire_terms(wire_edge(a, b, w));
      if (t < n) return wire_edge(a, b, w);
      t -= n;
    }
    return 0;
  }
  /// Does term t of message (b -> a) start its tensor's gradient at the producer (else it is added)?
  /// Only the farthest reader's sum does.
  static constexpr bool term_starts(int b, int a, int t) { return farthest(at(term_edge(b, a, t))); }
  /// Does edge i's contribution start what it is summed into: its term (a crossing edge) or, in the
  /// producer's own stage, the tensor's gradient?
  static constexpr bool contribution_starts(int i) {
    const edge& e = at(i);
    if (crosses(e)) return !farthest(e) || readers_before(e) == 0;
    return farthest(e) && readers_before(e) == 0;
  }

  // ---- links: what the stages' tasks read and write (exec/detail/graph_walk.hpp) --------------
  /// Input part `input` of layer `layer`: its source, and where its gradient goes.
  static constexpr part_link link(int layer, int input) {
    const int i = edge_of(layer, input);
    const edge& e = at(i);
    part_link l{i, e.producer, e.output};
    l.starts = contribution_starts(i);
    if (crosses(e)) {
      l.stage = producer_stage(e);
      l.wire = wire_of(i);
      if (e.producer >= 0) l.term = term_of(i);
    }
    return l;
  }
  /// Wire w of message (a -> b): the tensor stage a puts there (its own layer's output, or the
  /// model's input).
  static constexpr part_link wire_link(int a, int b, int w) {
    const int i = wire_edge(a, b, w);
    return {i, at(i).producer, at(i).output};
  }
  /// Term t of gradient message (b -> a): the gradient of stage a it goes to, and whether it starts
  /// that sum.
  static constexpr part_link term_link(int b, int a, int t) {
    const int i = term_edge(b, a, t);
    part_link l{i, at(i).producer, at(i).output};
    l.starts = term_starts(b, a, t);
    return l;
  }
};

template <class L, std::size_t In>
using input_part_t = part_t<typename L::input_type, In>;

/// The tensor types of a graph stage, and of the messages between stages.
template <class Model, auto Stages>
struct graph_stage_types {
  using wiring = graph_wiring<Model, Stages>;
  static constexpr int stage_count = Stages.stages();
  template <int S>
  static constexpr int first_layer = Stages.first[detail::ix(S)];
  template <int S>
  static constexpr int layer_count = Stages.first[detail::ix(S) + 1] - first_layer<S>;
  template <int Layer>
  using layer_t = typename Model::template layer_type<detail::ix(Layer)>;

  // The type of the tensor edge i carries.
  template <int I>
  using edge_tensor_t = input_part_t<layer_t<wiring::at(I).consumer>, detail::ix(wiring::at(I).input)>;

  template <int S, std::size_t... K>
  static auto inputs(std::index_sequence<K...>)
      -> std::tuple<typename layer_t<first_layer<S> + static_cast<int>(K)>::input_type...>;
  template <int S, std::size_t... K>
  static auto outputs(std::index_sequence<K...>)
      -> std::tuple<typename layer_t<first_layer<S> + static_cast<int>(K)>::output_type...>;
  /// Stage S's layers' inputs (each gathered from its sources) and outputs, one microbatch's worth.
  template <int S>
  using inputs_t = decltype(inputs<S>(std::make_index_sequence<detail::ix(layer_count<S>)>{}));
  template <int S>
  using outputs_t = decltype(outputs<S>(std::make_index_sequence<detail::ix(layer_count<S>)>{}));

  template <int A, int B, std::size_t... W>
  static auto values(std::index_sequence<W...>)
      -> bundle<edge_tensor_t<wiring::wire_edge(A, B, static_cast<int>(W))>...>;
  template <int B, int A, std::size_t... T>
  static auto terms(std::index_sequence<T...>)
      -> bundle<edge_tensor_t<wiring::term_edge(B, A, static_cast<int>(T))>...>;
  /// What stage A sends stage B (A < B) for a microbatch, and the gradient terms B sends back.
  template <int A, int B>
  using message_t = decltype(values<A, B>(std::make_index_sequence<detail::ix(wiring::wire_count(A, B))>{}));
  template <int B, int A>
  using gradient_t = decltype(terms<B, A>(std::make_index_sequence<detail::ix(wiring::term_count(B, A))>{}));

  template <int S, std::size_t... A>
  static auto inbox(std::index_sequence<A...>)
      -> std::tuple<std::conditional_t<S == 0, typename Model::input_type, bundle<>>,
                    message_t<static_cast<int>(A), S>...>;
  template <int S, std::size_t... B>
  static auto sendbox(std::index_sequence<B...>) -> std::tuple<message_t<S, S + 1 + static_cast<int>(B)>...>;
  template <int S, std::size_t... A>
  static auto outbox(std::index_sequence<A...>) -> std::tuple<gradient_t<S, static_cast<int>(A)>...>;
  /// What stage S takes in for a microbatch: the model's input (stage 0), then the message of each
  /// earlier stage A at index A + 1 (empty where A sends nothing).
  template <int S>
  using inbox_t = decltype(inbox<S>(std::make_index_sequence<detail::ix(S)>{}));
  /// The messages stage S sends each later stage B (at index B - S - 1), and the gradients it sends
  /// each earlier stage A (at index A).
  template <int S>
  using sendbox_t = decltype(sendbox<S>(std::make_index_sequence<detail::ix(stage_count - 1 - S)>{}));
  template <int S>
  using outbox_t = decltype(outbox<S>(std::make_index_sequence<detail::ix(S)>{}));
};

/// One microbatch of a graph stage's forward pass: each layer's gathered input and its output.
template <class Inputs, class Outputs>
struct graph_activations {
  Inputs xs{};
  Outputs ys{};
};

/// What boundary B carries each way: a chain's boundary tensor, or a graph's messages. (Class
/// templates, so that a chain never names a graph's types.)
template <class Model, auto Stages, bool Graph = !Model::is_chain>
struct stage_kinds {
  template <int B>
  using forward_message = typename stage_types<Model, Stages>::template boundary_tensor<B>;
  template <int B>
  using backward_message = forward_message<B>;
};
template <class Model, auto Stages>
struct stage_kinds<Model, Stages, true> {
  using g = graph_stage_types<Model, Stages>;
  template <int B>
  using forward_message = typename g::template message_t<B, B + 1>;
  template <int B>
  using backward_message = typename g::template gradient_t<B + 1, B>;
};

}  // namespace ctpipe::detail
