// Where a graph model's tensors live in the CUDA engine's buffers (models that are not chains, and
// chains whose layers pass several tensors): per stash slot of a stage, the messages it took in,
// each layer's output parts and saved state, and the messages it gives later stages; per set of
// gradients, each output part's gradient; per stage, the scratch its backward adds from and the
// gradient messages it sends by copy. Plain constexpr over the model's types and the stage plan
// (exec/detail/graph_stages.hpp gives which tensors each message carries).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/graph_stages.hpp>
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::cuda::detail {

inline constexpr std::size_t alignment = 256;  // every buffer starts on a 256-byte boundary
constexpr std::size_t round_up(std::size_t n) { return (n + alignment - 1) / alignment * alignment; }

// A view of tensor type T whose part I is at where(std::integral_constant<int, I>) (a constant,
// so that every offset the engine computes from it is one).
template <class T, class Where>
T parts_view(Where&& where) {
  if constexpr (is_tensors_v<T>) return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return T{part_t<T, I>{static_cast<typename part_t<T, I>::value_type*>(
          static_cast<void*>(where(std::integral_constant<int, static_cast<int>(I)>{})))}...};
    }
  (std::make_index_sequence<parts_v<T>>{});
  else return T{static_cast<typename T::value_type*>(static_cast<void*>(where(std::integral_constant<int, 0>{})))};
}

// The bytes of each part of tensor type T (device tensors; 0 for anything else, refused elsewhere).
template <class T, std::size_t P>
constexpr std::array<std::size_t, P> part_bytes() {
  std::array<std::size_t, P> b{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((b[I] =
          [] {
            if constexpr (requires { part_t<T, I>::bytes; })
              return static_cast<std::size_t>(part_t<T, I>::bytes);
            else
              return std::size_t{0};
          }()),
     ...);
  }
  (std::make_index_sequence<parts_v<T>>{});
  return b;
}

// The bytes of layer K's saved state (0 for a layer without one).
template <class Model, std::size_t K>
constexpr std::size_t saved_bytes_at() {
  using L = typename Model::template layer_type<K>;
  if constexpr (has_saved_state<L> && requires { saved_t<L>::bytes; })
    return ctpipe::detail::ix(saved_t<L>::bytes);
  else
    return 0;
}

/// The most parts a layer of Model takes or gives.
template <class Model>
constexpr std::size_t max_parts = []<std::size_t... K>(std::index_sequence<K...>) {
  return std::max({std::size_t{1}, parts_v<typename Model::input_type>,
                   parts_v<typename Model::template layer_type<K>::input_type>...,
                   parts_v<typename Model::template layer_type<K>::output_type>...});
}
(std::make_index_sequence<Model::size>{});

/// Offsets of a graph stage's tensors (bytes, each rounded up to the alignment). Indices: [s][a]
/// for the message between stages s and a; [k][o] for part o of global layer k.
template <std::size_t S, std::size_t L, std::size_t P>
struct graph_offsets {
  // In a stash slot of stage s: the message of each earlier stage a (inbox_at[s][a]), each layer's
  // output parts and saved state, and the message for each later stage b (sendbox_at[s][b]).
  std::array<std::array<std::size_t, S>, S> inbox_at{}, sendbox_at{};
  std::array<std::array<std::size_t, P>, L> out_at{};
  std::array<std::size_t, L> saved_at{};
  std::array<std::size_t, S> slot_bytes{};
  // In a set of gradients of stage s (the B's scratch, or an I's for its W): each output part's.
  std::array<std::array<std::size_t, P>, L> grad_at{};
  std::array<std::size_t, S> grad_bytes{};
  // In stage s's scratch: each input part's gradient where it is added to a sum (not where it starts
  // one), and the gradient message for each earlier stage a where it is sent by copy.
  std::array<std::array<std::size_t, P>, L> dx_at{};
  std::array<std::array<std::size_t, S>, S> outbox_at{};
  std::array<std::size_t, S> scratch_bytes{};
  // Message (a -> b), a < b: its bytes, and its gradient's (b -> a).
  std::array<std::array<std::size_t, S>, S> value_bytes{}, gradient_bytes{};
};

template <class Model, auto Stages>
struct graph_places {
  using wiring = ctpipe::detail::graph_wiring<Model, Stages>;
  static constexpr int stage_count = Stages.stages();
  static constexpr std::size_t P = max_parts<Model>;

  /// Offset of wire w in message (a -> b), and of term t in gradient message (b -> a).
  static constexpr std::size_t wire_offset(int a, int b, int w) {
    std::size_t at = 0;
    for (int v = 0; v < w; ++v) at += round_up(wiring::at(wiring::wire_edge(a, b, v)).bytes);
    return at;
  }
  static constexpr std::size_t term_offset(int b, int a, int t) {
    std::size_t at = 0;
    for (int v = 0; v < t; ++v) at += round_up(wiring::at(wiring::term_edge(b, a, v)).bytes);
    return at;
  }

  static constexpr auto offsets = [] {
    constexpr std::size_t S = static_cast<std::size_t>(stage_count), L = Model::size;
    constexpr auto out_bytes = []<std::size_t... K>(std::index_sequence<K...>) {
      return std::array<std::array<std::size_t, P>, L>{
          part_bytes<typename Model::template layer_type<K>::output_type, P>()...};
    }
    (std::make_index_sequence<L>{});
    constexpr auto in_parts = []<std::size_t... K>(std::index_sequence<K...>) {
      return std::array<std::size_t, L>{parts_v<typename Model::template layer_type<K>::input_type>...};
    }
    (std::make_index_sequence<L>{});
    constexpr auto saved_bytes = []<std::size_t... K>(std::index_sequence<K...>) {
      return std::array<std::size_t, L>{saved_bytes_at<Model, K>()...};
    }
    (std::make_index_sequence<L>{});
    graph_offsets<S, L, P> g{};
    for (int a = 0; a < stage_count; ++a)
      for (int b = a + 1; b < stage_count; ++b) {
        const int w = wiring::wire_count(a, b), t = wiring::term_count(b, a);
        g.value_bytes[ctpipe::detail::ix(a)][ctpipe::detail::ix(b)] = wire_offset(a, b, w);
        g.gradient_bytes[ctpipe::detail::ix(a)][ctpipe::detail::ix(b)] = term_offset(b, a, t);
      }
    for (int s = 0; s < stage_count; ++s) {
      const auto u = ctpipe::detail::ix(s);
      std::size_t slot = 0, grads = 0, scratch = 0;
      for (int a = 0; a < s; ++a) {
        g.inbox_at[u][ctpipe::detail::ix(a)] = slot;
        slot += g.value_bytes[ctpipe::detail::ix(a)][u];
        g.outbox_at[u][ctpipe::detail::ix(a)] = scratch;
        scratch += g.gradient_bytes[ctpipe::detail::ix(a)][u];
      }
      for (int k = Stages.first[u]; k < Stages.first[u + 1]; ++k) {
        const auto q = ctpipe::detail::ix(k);
        for (std::size_t o = 0; o < P; ++o) {
          g.out_at[q][o] = slot;
          slot += round_up(out_bytes[q][o]);
          g.grad_at[q][o] = grads;
          grads += round_up(out_bytes[q][o]);
        }
        g.saved_at[q] = slot;
        slot += round_up(saved_bytes[q]);
        for (std::size_t i = 0; i < in_parts[q]; ++i) {
          const int e = wiring::edge_of(k, static_cast<int>(i));
          g.dx_at[q][i] = scratch;
          if (!wiring::contribution_starts(e) || wiring::at(e).producer < 0) scratch += round_up(wiring::at(e).bytes);
        }
      }
      for (int b = s + 1; b < stage_count; ++b) {
        g.sendbox_at[u][ctpipe::detail::ix(b)] = slot;
        slot += g.value_bytes[u][ctpipe::detail::ix(b)];
      }
      g.slot_bytes[u] = slot;
      g.grad_bytes[u] = grads;
      g.scratch_bytes[u] = scratch;
    }
    return g;
  }();
};

/// Whether the engine runs Model through its graph path: a model that is not a chain, or a chain
/// one of whose layers takes or gives several tensors (a boundary of several tensors).
template <class Model>
constexpr bool graph_path = !Model::is_chain || max_parts<Model> > 1;

}  // namespace ctpipe::cuda::detail
