// The walk of a graph stage's tasks, written once for every backend: what an F takes in, runs and
// sends, and in which order a B or I sums each gradient. The host compute (exec/detail/
// host_graph_tasks.hpp) and the CUDA engine (cuda/detail/engine_graph.hpp) walk a stage with their
// own primitives (a copy, an add, a layer call); the order, and so the bits of every sum, is this
// header's (exec/detail/graph_stages.hpp says why it is sequential_step's).
//
// Each step of a walk calls one of the backend's functions with its constants: a stage or layer as
// std::integral_constant<int, N>, a part, wire or term the same way, and where a tensor comes from
// or goes to as link_constant<part_link>.
#pragma once

#include <type_traits>
#include <utility>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/graph_stages.hpp>
#include <ctpipe/model/tensors.hpp>  // parts_v

namespace ctpipe::detail {

template <part_link L>
struct link_constant {
  static constexpr part_link value = L;
};

/// The walk of the tasks of Model's graph stages under stage plan Stages, whose crossings (the skip
/// messages: each with a `from` and a `to` stage) are Skips.
template <class Model, auto Stages, auto Skips>
struct graph_walk {
  using wiring = graph_wiring<Model, Stages>;
  static constexpr int stage_count = Stages.stages();
  template <int S>
  static constexpr int first_layer = Stages.first[ix(S)];
  template <int S>
  static constexpr int end_layer = Stages.first[ix(S) + 1];

  /// Does stage a send stage b (a < b) a message: its neighbour's, or a crossing's?
  static constexpr bool sends(int a, int b) {
    if (b == a + 1) return true;
    for (const auto& k : Skips)
      if (k.from == a && k.to == b) return true;
    return false;
  }

  /// Each input part P of layer L, in order: f(P, link_constant<its link>).
  template <int L, class F>
  static void each_input(F&& f) {
    [&]<int... P>(std::integer_sequence<int, P...>) {
      (f(std::integral_constant<int, P>{}, link_constant<wiring::link(L, P)>{}), ...);
    }
    (std::make_integer_sequence<int, part_count<L>>{});
  }

  /// The layers of stage S from the first: f(L).
  template <int S, class F>
  static void each_layer(F&& f) {
    [&]<int... K>(std::integer_sequence<int, K...>) { (f(std::integral_constant<int, first_layer<S> + K>{}), ...); }
    (std::make_integer_sequence<int, end_layer<S> - first_layer<S>>{});
  }

  /// An F of stage S: take(A) for each earlier stage A that sends it a message, in stage order; then
  /// layers() (the backend runs them in order: each_layer); then wire(B, W, link) for each wire W
  /// of its message to each later stage B, in stage and wire order (the link names the tensor that
  /// goes there).
  template <int S, class Take, class Layers, class Wire>
  static void forward(Take&& take, Layers&& layers, Wire&& wire) {
    [&]<int... I>(std::integer_sequence<int, I...>) { (take(std::integral_constant<int, sender(S, I)>{}), ...); }
    (std::make_integer_sequence<int, senders(S)>{});
    layers();
    [&]<int... I>(std::integer_sequence<int, I...>) { (wires<S, receiver(S, receivers(S) - 1 - I)>(wire), ...); }
    (std::make_integer_sequence<int, receivers(S)>{});
  }

  /// A B or I of stage S, in the order that makes its sums sequential_step's:
  /// - gradients(B) for the message of each later stage B that S sends one, the farthest first
  ///   (the backend reads it, then walks its terms with each_term);
  /// - loss(S) where S is the last stage (a generic lambda: nothing of it is compiled elsewhere);
  /// - the layers from the top down: layer(L), then input_gradient(L, P, link) for each input part P
  ///   that a layer made (the model's input has no gradient), in part order: link.starts, the part's
  ///   gradient starts what it goes to (link.stage >= 0: term link.term of the message back to that
  ///   stage; else the gradient of output link.output of layer link.layer), else it is added to it.
  template <int S, class Gradients, class Loss, class Layer, class InputGradient>
  static void backward(Gradients&& gradients, Loss&& loss, Layer&& layer, InputGradient&& input_gradient) {
    [&]<int... I>(std::integer_sequence<int, I...>) { (gradients(std::integral_constant<int, receiver(S, I)>{}), ...); }
    (std::make_integer_sequence<int, receivers(S)>{});
    if constexpr (S == stage_count - 1) loss(std::integral_constant<int, S>{});
    [&]<int... D>(std::integer_sequence<int, D...>) {
      ((layer(std::integral_constant<int, end_layer<S> - 1 - D>{}),
        input_gradients<end_layer<S> - 1 - D>(input_gradient)),
       ...);
    }
    (std::make_integer_sequence<int, end_layer<S> - first_layer<S>>{});
  }

  /// The terms of stage B's gradient message to stage A, in order: f(T, link), the link naming the
  /// gradient of stage A it goes to (link.starts: it starts that sum, else it is added).
  template <int B, int A, class F>
  static void each_term(F&& f) {
    [&]<int... T>(std::integer_sequence<int, T...>) {
      (f(std::integral_constant<int, T>{}, link_constant<wiring::term_link(B, A, T)>{}), ...);
    }
    (std::make_integer_sequence<int, wiring::term_count(B, A)>{});
  }

 private:
  // Stage s's earlier stages that send it a message: how many, and the i-th in stage order.
  static constexpr int senders(int s) {
    int n = 0;
    for (int a = 0; a < s; ++a) n += sends(a, s) ? 1 : 0;
    return n;
  }
  static constexpr int sender(int s, int i) {
    for (int a = 0; a < s; ++a)
      if (sends(a, s) && i-- == 0) return a;
    return 0;
  }
  // Its later stages that it sends one: how many, and the i-th, the farthest first.
  static constexpr int receivers(int s) {
    int n = 0;
    for (int b = s + 1; b < stage_count; ++b) n += sends(s, b) ? 1 : 0;
    return n;
  }
  static constexpr int receiver(int s, int i) {
    for (int b = stage_count - 1; b > s; --b)
      if (sends(s, b) && i-- == 0) return b;
    return 0;
  }
  // Layer l's input parts that a layer made (the model's input has no gradient): how many, and the
  // i-th in part order.
  template <int L>
  static constexpr int part_count = static_cast<int>(parts_v<typename Model::template layer_type<ix(L)>::input_type>);
  static constexpr int made_parts(int l, int parts) {
    int n = 0;
    for (int p = 0; p < parts; ++p) n += wiring::link(l, p).layer >= 0 ? 1 : 0;
    return n;
  }
  static constexpr int made_part(int l, int i) {
    for (int p = 0;; ++p)
      if (wiring::link(l, p).layer >= 0 && i-- == 0) return p;
  }
  template <int L, class InputGradient>
  static void input_gradients(InputGradient& input_gradient) {
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (input_gradient(std::integral_constant<int, L>{}, std::integral_constant<int, made_part(L, I)>{},
                      link_constant<wiring::link(L, made_part(L, I))>{}),
       ...);
    }
    (std::make_integer_sequence<int, made_parts(L, part_count<L>)>{});
  }
  // The wires of stage S's message to stage B.
  template <int S, int B, class Wire>
  static void wires(Wire& wire) {
    [&]<int... W>(std::integer_sequence<int, W...>) {
      (wire(std::integral_constant<int, B>{}, std::integral_constant<int, W>{},
            link_constant<wiring::wire_link(S, B, W)>{}),
       ...);
    }
    (std::make_integer_sequence<int, wiring::wire_count(S, B)>{});
  }
};

}  // namespace ctpipe::detail
