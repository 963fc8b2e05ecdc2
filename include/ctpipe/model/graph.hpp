// Models shaped like graphs: a layer's input parts may come from any earlier layer's outputs (a
// residual, a skip connection, an encoder output read by several layers) or from the model's input,
// not only from the previous layer. The layers keep one order (a topological one); each tensor that
// flows is an edge from a (layer, output part) to a (layer, input part).
//
//   using block = ctpipe::model<norm,                                  // 0: the model's input
//                               attention,                             // 1: from 0
//                               ctpipe::node<add, ctpipe::back<1>,     // 2: attention's output ...
//                                            ctpipe::from<-1>>,        //    ... and the model's input
//                               ...>;
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/model/tensors.hpp>

namespace ctpipe {

/// Output part O of layer K of the model (K = -1: part O of the model's input).
template <int K, int O = 0>
struct from {};
/// Output part O of the layer N places before the one that names it (back<1>: the previous layer;
/// N = the node's index + 1: the model's input).
template <int N, int O = 0>
struct back {};

/// Layer L in a model, whose input parts (one, or each part of a ctpipe::tensors input_type) come, in
/// order, from Sources... (each a from<K, O> or a back<N, O>). A layer not wrapped in node takes
/// the previous layer's whole output (layer 0: the model's input).
template <class L, class... Sources>
struct node {};

/// One tensor that flows in a model: output part `output` of layer `producer` (-1: the model's
/// input) is input part `input` of layer `consumer`; `bytes` is its size (a device tensor's bytes,
/// a host tensor's sizeof); `token_bytes` the bytes of one of its tokens where it is token-major
/// (ctpipe/model/extent.hpp), 0 where it has a fixed size.
struct edge {
  int producer = -1, output = 0, consumer = 0, input = 0;
  std::size_t bytes = 0, token_bytes = 0;
  constexpr bool operator==(const edge&) const = default;
};

namespace detail {

// A model's entry: the layer, and whether it names its sources.
template <class T>
struct entry {
  using layer = T;
  static constexpr bool named = false;
  static constexpr int shares = -1;  // the layer whose parameters it shares (ctpipe/model/shared.hpp), or -1
};
template <class L, class... S>
struct entry<node<L, S...>> {
  using layer = L;
  static constexpr bool named = sizeof...(S) > 0;  // (node<L>: as L alone)
  static constexpr int shares = -1;
};

// Where a source points, for the layer at index K: the producing layer (-1: the model's input; below
// -1: before it, or not a from<> / back<> at all: the model's order rule refuses it, naming both forms)
// and its output part.
template <class S>
struct source_of {
  static constexpr int producer(int) { return -2; }
  static constexpr int output = 0;
};
template <int K, int O>
struct source_of<from<K, O>> {
  static constexpr int producer(int) { return K; }
  static constexpr int output = O;
};
template <int N, int O>
struct source_of<back<N, O>> {
  static constexpr int producer(int k) { return N >= 1 ? k - N : k; }  // (back<0> points at itself: refused)
  static constexpr int output = O;
};

struct source {
  int producer = -1, output = 0;
};

// The sources of entry E at index K: those it names, or the previous layer's parts in order.
template <class E, int K, std::size_t Parts>
struct sources_of {
  static constexpr std::array<source, Parts> value = [] {
    std::array<source, Parts> s{};
    for (std::size_t i = 0; i < Parts; ++i) s[i] = {K - 1, static_cast<int>(i)};
    return s;
  }();
};
template <class L, class... S, int K, std::size_t Parts>
requires(sizeof...(S) > 0) struct sources_of<node<L, S...>, K, Parts> {
  static constexpr std::array<source, sizeof...(S)> value{source{source_of<S>::producer(K), source_of<S>::output}...};
};

// The bytes of one tensor: a device tensor's `bytes`, a host tensor's sizeof.
template <class T>
constexpr std::size_t tensor_bytes() {
  if constexpr (requires { T::bytes; })
    return static_cast<std::size_t>(T::bytes);
  else
    return sizeof(T);
}

}  // namespace detail

}  // namespace ctpipe
