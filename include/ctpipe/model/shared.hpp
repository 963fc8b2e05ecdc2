// Parameters that several layers of a model share: a tied embedding and output head, or any group
// of layers with one set of weights.
//
//   using gpt = ctpipe::model<embed,                                   // 0: the group's first layer
//                             block, block,
//                             ctpipe::shared_with<0, head>>;            // 3: uses layer 0's weights
//
// Each member keeps its own copy of what it shares, and its own gradient. The executors start the
// copies equal (from the group's first layer) and, once a step's last backward of every member has
// run, give every member the members' gradients summed in layer order, so that the same optimizer
// step keeps the copies equal. Where the members run on several ranks, the executor sums across
// them; where all run on one, the sum is local. ctpipe/model/shared_parameters.hpp holds the
// group tables and the sums.
//
// What a member shares is its `shared_parameters()` and `shared_gradients()` where it declares them
// (a part of its parameters: a dense layer's weights without its bias), else its `parameters()`
// and `gradients()`. Every member's span has the same element type and length.
#pragma once

#include <concepts>
#include <span>
#include <type_traits>

#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/layer.hpp>

namespace ctpipe {

/// Entry E of a model (a layer, or a ctpipe::node) shares the parameters of layer K, an earlier
/// layer that is its group's first (K names no shared_with itself). E's layer keeps a copy of them
/// that the executors keep equal to layer K's.
template <int K, class E>
struct shared_with {};

/// A layer that names the part of its parameters it shares: shared_parameters() and
/// shared_gradients(), spans of one type and length.
template <class L>
concept declares_shared_parameters = requires(L& l) {
  { l.shared_parameters() } -> std::convertible_to<std::span<typename decltype(l.shared_parameters())::element_type>>;
  { l.shared_gradients() } -> std::same_as<decltype(l.shared_parameters())>;
};

/// A layer that can be a member of a shared group: what it shares is shared_parameters() where it
/// declares them, else all its parameters().
template <class L>
concept shareable_layer = declares_shared_parameters<L> || has_parameters<L>;

/// What L shares (Gradients: their gradients): its shared_parameters() (shared_gradients()), else
/// its parameters() (gradients()).
template <bool Gradients, shareable_layer L>
constexpr auto shared_span_of(L& l) {
  if constexpr (declares_shared_parameters<L> && Gradients)
    return l.shared_gradients();
  else if constexpr (declares_shared_parameters<L>)
    return l.shared_parameters();
  else if constexpr (Gradients)
    return l.gradients();
  else
    return l.parameters();
}
template <shareable_layer L>
constexpr auto shared_parameters_of(L& l) {
  return shared_span_of<false>(l);
}
template <shareable_layer L>
constexpr auto shared_gradients_of(L& l) {
  return shared_span_of<true>(l);
}

namespace detail {

template <int K, class E>
struct entry<shared_with<K, E>> : entry<E> {
  static constexpr int shares = K;
};

template <int S, class E, int K, std::size_t Parts>
struct sources_of<shared_with<S, E>, K, Parts> : sources_of<E, K, Parts> {};

// The element type of what L shares (void for a layer that cannot share).
template <class L>
struct shared_element {
  using type = void;
};
template <shareable_layer L>
struct shared_element<L> {
  using type = std::remove_cvref_t<decltype(shared_parameters_of(std::declval<L&>())[0])>;
};

}  // namespace detail

}  // namespace ctpipe
