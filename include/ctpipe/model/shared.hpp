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
// and `gradients()`. Every member's span has the same element type and length: a compile-time
// error where the layers' types give both lengths (shared_parameter_count, or parameter_tensors
// where a layer shares all its parameters), and a run-time one (when an executor is built) where
// only the run knows them.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/parameter_tensors.hpp>

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

// How many elements L shares, where its type says so: `static constexpr std::size_t
// shared_parameter_count` beside its shared_parameters(); the sum of its parameter_tensors where it
// shares all its parameters; 0 where only the run knows.
template <class L>
constexpr std::size_t shared_element_count() {
  if constexpr (declares_shared_parameters<L>) {
    if constexpr (requires { requires std::is_convertible_v<decltype(L::shared_parameter_count), std::size_t>; })
      return L::shared_parameter_count;
    else
      return 0;
  } else if constexpr (declares_parameter_tensors<L>) {
    std::size_t n = 0;
    for (const parameter_tensor& t : L::parameter_tensors) n += t.size();
    return n;
  } else {
    return 0;
  }
}

// Layer Layer (a shared_with<SharesWith, ...>) shares LayerElements elements, and layer SharesWith
// FirstElements: both known at compile time, they must be equal. (Its own template, so that the
// compiler's message shows the four numbers.)
template <std::size_t Layer, int SharesWith, std::size_t LayerElements, std::size_t FirstElements>
struct shared_element_counts {
  static constexpr bool test() {
    static_assert(LayerElements == FirstElements,
                  "ctpipe::model: the layers of shared_with<K, L> must share as many elements: "
                  "shared_element_counts<L's index, K, L's elements, layer K's elements> says which and how many");
    return LayerElements == FirstElements;
  }
  static constexpr bool value = test();
};

// The rules of a shared_with<K, L> at index Index (KShares: layer K's own shares, where K is in
// range; Shareable, KShareable: whether L and layer K have what they share; SameType: of one type;
// Count, KCount: how many elements each shares, 0 where only the run knows).
template <std::size_t Index, int K, int KShares, bool Shareable, bool KShareable, bool SameType, std::size_t Count,
          std::size_t KCount>
struct shared_check {
  static constexpr bool in_range = K >= 0 && K < static_cast<int>(Index);
  static constexpr bool test() {
    static_assert(in_range,
                  "ctpipe::model: shared_with<K, L> shares the parameters of an earlier layer: 0 <= K < L's index");
    static_assert(!in_range || KShares < 0,
                  "ctpipe::model: shared_with<K, L> names its group's first layer: layer K must not be a shared_with "
                  "itself (name the layer that one shares with)");
    static_assert(!in_range || KShares >= 0 || (Shareable && KShareable),
                  "ctpipe::model: both layers of shared_with<K, L> need what they share: parameters() and gradients(), "
                  "or shared_parameters() and shared_gradients() (a part of them)");
    static_assert(!in_range || KShares >= 0 || !(Shareable && KShareable) || SameType,
                  "ctpipe::model: the layers of shared_with<K, L> must share parameters of one element type");
    constexpr bool others = in_range && KShares < 0 && Shareable && KShareable && SameType;
    if constexpr (others && Count != 0 && KCount != 0)
      return shared_element_counts<Index, K, Count, KCount>::value;
    else
      return others;
  }
  static constexpr bool value = test();
};
}  // namespace detail

}  // namespace ctpipe
