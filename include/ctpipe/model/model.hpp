// A model: a type-level list of layers, held in a Boost.Hana tuple.
//
//   using net = ctpipe::model<embed, block, block, head>;
//
// Instantiating model<...> checks every layer and every boundary between two layers; a bad model
// fails to compile with a message naming the rule, and the template arguments of
// ctpipe::detail::layer_check / layer_chain_check show which layer (by index) breaks it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/at.hpp>  // hana::at_c
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>

#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/layer.hpp>
#include <ctpipe/model/parameter_tensors.hpp>
#include <ctpipe/model/shared.hpp>
#include <ctpipe/model/tensors.hpp>

namespace ctpipe {

namespace detail {

// An error here names the index of the offending layer (Index) and its type (L). A layer is a host
// layer (forward(x, y)) or a device layer (forward(const ctpipe::cuda::context&, x, y), device tensors,
// ctpipe/cuda/layer.hpp).
template <std::size_t Index, class L>
struct layer_check {
  // A layer of another kind (a device layer: ctpipe/cuda/layer.hpp) is checked by its own rules.
  static constexpr bool device = device_layer_traits<L>::claimed;
  static constexpr bool saves = has_saved_state<L>;
  // The rules live in a function, not in the class: a failed rule then leaves `value` a constant
  // (false), and the compiler reports that rule alone instead of a cascade through every use.
  static constexpr bool test() {
    if constexpr (device) {
      return device_layer_traits<L>::test();
    } else {
      static_assert(has_layer_types<L>,
                    "ctpipe::model: this layer is not a layer: it needs member types input_type and output_type");
      static_assert(
          !has_layer_types<L> || has_constant_cost<L>,
          "ctpipe::model: this layer is not a layer: it needs a compile-time cost (static constexpr double cost)");
      static_assert(
          !has_layer_types<L> || saves || has_forward<L>,
          "ctpipe::model: this layer is not a layer: it needs forward(const input_type& x, output_type& y) "
          "(or, for a device layer, forward(const ctpipe::cuda::context&, const input_type& x, output_type& y))");
      static_assert(
          !has_layer_types<L> || !saves || has_forward<L>,
          "ctpipe::model: this layer has a saved_type, so it needs forward(const input_type& x, output_type& y, "
          "saved_type& s) (a const ctpipe::context& may come first)");
      static_assert(
          !has_layer_types<L> || saves || has_backward<L>,
          "ctpipe::model: this layer is not a layer: it needs backward(const input_type& x, const output_type& y, "
          "const output_type& dy, input_type& dx)");
      static_assert(!has_layer_types<L> || !saves || has_backward<L>,
                    "ctpipe::model: this layer has a saved_type, so it needs backward(const input_type& x, const "
                    "output_type& y, const saved_type& s, const output_type& dy, input_type& dx) (a const "
                    "ctpipe::context& may come first)");
      static_assert(
          !has_layer_types<L> || !saves || std::semiregular<saved_t<L>>,
          "ctpipe::model: a layer's saved_type must be default-constructible and copy-assignable (the executors "
          "allocate one per stash slot, once)");
      static_assert(!has_layer_types<L> || saves || !layer<L> || !declares_split_backward<L> || splittable_layer<L>,
                    "ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, "
                    "and it needs both, as void backward_input(const input_type& x, const output_type& y, "
                    "const output_type& dy, input_type& dx) and void backward_weight(const input_type& x, "
                    "const output_type& y, const output_type& dy)");
      static_assert(
          !has_layer_types<L> || !saves || !layer<L> || !declares_split_backward<L> || splittable_layer<L>,
          "ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, "
          "and it needs both, as void backward_input(const input_type& x, const output_type& y, saved_type& s, "
          "const output_type& dy, input_type& dx) and void backward_weight(const input_type& x, "
          "const output_type& y, const saved_type& s, const output_type& dy) (a const ctpipe::context& may "
          "come first)");
      return layer<L> && (!declares_split_backward<L> || splittable_layer<L>);
    }
  }
  static constexpr bool value = test() && parameter_tensors_valid<L>();
};

// An error here names the boundary: layer Index's output type Out is not layer Index + 1's input In.
template <std::size_t Index, class Out, class In>
struct layer_chain_check {
  static constexpr bool test() {
    static_assert(std::is_same_v<Out, In>,
                  "ctpipe::model: the output_type of a layer must be the input_type of the next layer (each stage's "
                  "output feeds the next stage's input)");
    return std::is_same_v<Out, In>;
  }
  static constexpr bool value = test();
};

// The rules of a node's sources, each with one message; an error names the node's index (Index),
// its input part (Input) and, where it has resolved, the layer it reads (Producer, -1: the model's
// input) and that layer's output part (Output).
template <std::size_t Index, std::size_t Sources, std::size_t Parts>
struct node_sources_check {
  static constexpr bool test() {
    static_assert(Index > 0 || Sources == 0,
                  "ctpipe::model: layer 0 takes the model's input; it cannot be a node with sources");
    static_assert(Index == 0 || Sources == Parts,
                  "ctpipe::model: a node<L, sources...> names one source for each part of L's input_type (one for a "
                  "tensor, N for ctpipe::tensors of N types)");
    return Index == 0 ? Sources == 0 : Sources == Parts;
  }
  static constexpr bool value = test();
};
template <std::size_t Index, std::size_t Input, int Producer>
struct node_order_check {
  static constexpr bool test() {
    static_assert(Producer >= -1 && Producer < static_cast<int>(Index),
                  "ctpipe::model: a node reads an earlier layer or the model's input: from<K, O> with -1 <= K < the "
                  "node's index, back<N, O> with 1 <= N <= the node's index + 1");
    return Producer >= -1 && Producer < static_cast<int>(Index);
  }
  static constexpr bool value = test();
};
template <std::size_t Index, std::size_t Input, int Producer, int Output, std::size_t Parts>
struct node_output_check {
  static constexpr bool test() {
    static_assert(Output >= 0 && Output < static_cast<int>(Parts),
                  "ctpipe::model: a node names an output part that the layer it reads does not have (O in from<K, O> "
                  "or back<N, O> counts the parts of that layer's output_type from 0)");
    return Output >= 0 && Output < static_cast<int>(Parts);
  }
  static constexpr bool value = test();
};
template <std::size_t Index, std::size_t Input, int Producer, int Output, class From, class To>
struct edge_check {
  static constexpr bool test() {
    static_assert(std::is_same_v<From, To>,
                  "ctpipe::model: a node's input part must have the type of the output part it reads (from<K, O> or "
                  "back<N, O>)");
    return std::is_same_v<From, To>;
  }
  static constexpr bool value = test();
};
template <int Producer, int Output, bool Read>
struct output_read_check {
  static constexpr bool test() {
    static_assert(Read,
                  "ctpipe::model: every output part of a layer but the last must be read by a later layer (the next "
                  "layer, or a node's from<K, O> or back<N, O>)");
    return Read;
  }
  static constexpr bool value = test();
};
// A view of device memory whose elements the device executors know how to add (their runtime's
// axpy: float or double).
template <class T>
concept summed_by_executor = requires(T t) {
  typename T::value_type;
  T::bytes;
  t.data;
}
&&(std::is_same_v<typename T::value_type, float> || std::is_same_v<typename T::value_type, double>);
template <int Producer, int Output, class T, bool Several>
struct gradient_sum_check {
  static constexpr bool ok = !Several || requires(T & a, const T& b) { a += b; }
  || summed_by_executor<T>;
  static constexpr bool test() {
    static_assert(ok,
                  "ctpipe::model: an output part read by several layers receives the sum of their gradients, so its "
                  "type needs T& operator+=(const T&) (a host tensor), or float or double elements (a device tensor: "
                  "the device executors add them)");
    return ok;
  }
  static constexpr bool value = test();
};

// The rules of the token-major tensors (ctpipe/model/extent.hpp) of layer Index's input or output:
// each laid out as max_tokens equal rows, and all of a model's with the same max_tokens (Expected:
// the first one's, in layer order).
template <std::size_t Index, token_layout Layout>
struct token_layout_check {
  static constexpr bool test() {
    static_assert(Layout != token_layout::zero_capacity,
                  "ctpipe::model: a token-major tensor (one that declares max_tokens) needs max_tokens >= 1");
    static_assert(Layout != token_layout::not_divisible,
                  "ctpipe::model: a token-major tensor is max_tokens rows of equal size: its bytes (sizeof, or a "
                  "device view's `bytes`) must be a multiple of max_tokens");
    static_assert(Layout != token_layout::not_trivially_copyable,
                  "ctpipe::model: a token-major host tensor must be trivially copyable (the executors copy the "
                  "tokens a microbatch uses as bytes)");
    return Layout == token_layout::ok;
  }
  static constexpr bool value = test();
};
template <std::size_t Index, std::size_t Tokens, std::size_t Expected>
struct token_capacity_check {
  static constexpr bool test() {
    static_assert(Tokens == 0 || Tokens == Expected,
                  "ctpipe::model: every token-major tensor of a model has the same max_tokens (a microbatch's "
                  "extent counts the same tokens in each of them)");
    return Tokens == 0 || Tokens == Expected;
  }
  static constexpr bool value = test();
};

// A layer's input and output types, named only when asked for (a model of a type that is no layer
// reports that, not a missing member).
template <class L>
struct input_of {
  using type = typename L::input_type;
};
template <class L>
struct output_of {
  using type = typename L::output_type;
};

template <bool Checked, class L>
using checked_layer_t = std::conditional_t<Checked, L, stand_in_layer>;

template <class Seq, class... Entries>
struct model_checks;
template <std::size_t... I, class... Entries>
struct model_checks<std::index_sequence<I...>, Entries...> {
  static_assert(sizeof...(Entries) > 0, "ctpipe::model: a model needs at least one layer");
  using list = std::tuple<typename entry<Entries>::layer...>;
  using entries = std::tuple<Entries...>;
  static constexpr bool layers_ok = (layer_check<I, typename entry<Entries>::layer>::value && ...);
  static constexpr std::size_t size = sizeof...(Entries);
  template <std::size_t K>
  using layer_t = std::tuple_element_t<K, list>;
  template <std::size_t K>
  using input_t = typename layer_t<K>::input_type;
  // The type of output part O of layer P (-1: of the model's input).
  template <int P>
  static constexpr std::size_t at_or_first = P >= 0 ? static_cast<std::size_t>(P) : 0;
  template <int P>
  static constexpr bool is_input = P == -1;
  template <int P>
  using produced_t =
      typename std::conditional_t<is_input<P>, input_of<layer_t<0>>, output_of<layer_t<at_or_first<P>>>>::type;

  template <std::size_t K>
  static constexpr auto sources =
      sources_of<std::tuple_element_t<K, entries>, static_cast<int>(K), parts_v<input_t<K>>>::value;

  // Layer K's inputs: the previous layer's output (unnamed), or each source's output part.
  template <std::size_t K>
  static constexpr bool inputs_ok() {
    using E = std::tuple_element_t<K, entries>;
    if constexpr (K == 0 && !entry<E>::named) {
      return true;
    } else if constexpr (!entry<E>::named) {
      if constexpr (K == 0)
        return true;
      else
        return layer_chain_check<K - 1, typename layer_t<K - 1>::output_type, input_t<K>>::value;
    } else if constexpr (!node_sources_check<K, sources<K>.size(), parts_v<input_t<K>>>::value) {
      return false;
    } else {
      return []<std::size_t... In>(std::index_sequence<In...>) { return (source_ok<K, In>() && ...); }
      (std::make_index_sequence<sources<K>.size()>{});
    }
  }
  template <std::size_t K, std::size_t In>
  static constexpr bool source_ok() {
    constexpr int p = sources<K>[In].producer, o = sources<K>[In].output;
    if constexpr (!node_order_check<K, In, p>::value) {
      return false;
    } else if constexpr (!node_output_check<K, In, p, o, parts_v<produced_t<p>>>::value) {
      return false;
    } else {
      return edge_check<K, In, p, o, part_t<produced_t<p>, static_cast<std::size_t>(o)>, part_t<input_t<K>, In>>::value;
    }
  }

  // How many inputs read output part O of layer P.
  static constexpr int readers(int p, int o) {
    int n = 0;
    const auto count = [&](const auto& src) {
      for (const source& x : src)
        if (x.producer == p && x.output == o) ++n;
    };
    (count(sources<I>), ...);
    return n;
  }
  // (Named constants, not expressions with > in template arguments: nvcc misreads those.)
  template <std::size_t P, std::size_t O>
  static constexpr bool read = P + 1 == size || readers(static_cast<int>(P), static_cast<int>(O)) != 0;
  template <std::size_t P, std::size_t O>
  static constexpr bool summed = readers(static_cast<int>(P), static_cast<int>(O)) >= 2;
  template <std::size_t P>
  static constexpr bool outputs_ok() {
    using Y = typename layer_t<P>::output_type;
    return []<std::size_t... O>(std::index_sequence<O...>) {
      return (output_read_check<static_cast<int>(P), static_cast<int>(O), read<P, O>>::value && ...) &&
             (gradient_sum_check<static_cast<int>(P), static_cast<int>(O), part_t<Y, O>, summed<P, O>>::value && ...);
    }
    (std::make_index_sequence<parts_v<Y>>{});
  }
  // The tokens of the first token-major tensor among the layers' inputs and outputs, in layer
  // order (0: none), and the rules of each such tensor of layer K.
  template <class T>
  static constexpr std::size_t parts_capacity() {
    return []<std::size_t... P>(std::index_sequence<P...>) {
      std::size_t c = 0;
      ((c = c != 0 ? c : max_tokens_v<part_t<T, P>>), ...);
      return c;
    }
    (std::make_index_sequence<parts_v<T>>{});
  }
  static constexpr std::size_t capacity = [] {
    std::size_t c = 0;
    ((c = c != 0 ? c : parts_capacity<input_t<I>>()), ...);
    ((c = c != 0 ? c : parts_capacity<typename layer_t<I>::output_type>()), ...);
    return c;
  }();
  template <class T>
  static constexpr bool token_parts_ok() {
    return []<std::size_t... P>(std::index_sequence<P...>) {
      return ((token_layout_of<part_t<T, P>>() == token_layout::ok) && ...) &&
             ((max_tokens_v<part_t<T, P>> == 0 || max_tokens_v<part_t<T, P>> == capacity) && ...);
    }
    (std::make_index_sequence<parts_v<T>>{});
  }
  template <std::size_t K, class T>
  static constexpr bool token_parts_checked() {
    return []<std::size_t... P>(std::index_sequence<P...>) {
      if constexpr (!(token_layout_check<K, token_layout_of<part_t<T, P>>()>::value && ...))
        return false;
      else
        return (token_capacity_check<K, max_tokens_v<part_t<T, P>>, capacity>::value && ...);
    }
    (std::make_index_sequence<parts_v<T>>{});
  }
  template <std::size_t K>
  static constexpr bool tokens_ok() {
    using X = input_t<K>;
    using Y = typename layer_t<K>::output_type;
    if constexpr (token_parts_ok<X>() && token_parts_ok<Y>())
      return true;
    else if constexpr (!token_parts_ok<X>())
      return token_parts_checked<K, X>();
    else
      return token_parts_checked<K, Y>();
  }
  // Layer K's shared_with, if it has one.
  template <std::size_t K>
  static constexpr bool shared_ok() {
    constexpr int s = entry<std::tuple_element_t<K, entries>>::shares;
    if constexpr (s == -1) {
      return true;
    } else {
      constexpr bool in_range = s >= 0 && s < static_cast<int>(K);
      constexpr std::size_t at = in_range ? static_cast<std::size_t>(s) : 0;
      using L = layer_t<K>;
      using Owner = layer_t<at>;
      return shared_check < K, s, in_range ? entry<std::tuple_element_t<at, entries>>::shares : -1, shareable_layer<L>,
             shareable_layer<Owner>,
             std::is_same_v<typename shared_element<L>::type, typename shared_element<Owner>::type>,
             shared_element_count<L>(), shared_element_count<Owner>() > ::value;
    }
  }
  // Each rule is looked at only where the ones before it hold, so one mistake gives one message.
  static constexpr bool test() {
    if constexpr (!layers_ok)
      return false;
    else if constexpr (!(inputs_ok<I>() && ...))
      return false;
    else if constexpr (!(outputs_ok<I>() && ...))
      return false;
    else if constexpr (!(shared_ok<I>() && ...))
      return false;
    else
      return first_failing_tokens<0>();
  }
  // The first layer whose tensors break a token rule says so (one message).
  template <std::size_t K>
  static constexpr bool first_failing_tokens() {
    if constexpr (K == size)
      return true;
    else if constexpr (!tokens_ok<K>())
      return false;
    else
      return first_failing_tokens<K + 1>();
  }
  static constexpr bool value = test();
};

}  // namespace detail

/// A model: layers in order. `layers` holds one instance of each (parameters live in the layers).
/// An entry is a layer (it reads the previous layer's whole output), or a ctpipe::node<L, sources...>
/// whose input parts come from earlier layers' outputs (ctpipe/model/graph.hpp).
template <class... Entries>
struct model {
  using checks = detail::model_checks<std::index_sequence_for<Entries...>, Entries...>;
  // True when every rule holds. A broken rule has said why (one message, naming the layer by its
  // index); the model then holds stand-ins for its layers, so nothing else fails with it.
  static constexpr bool checked = checks::value;

  static constexpr std::size_t size = sizeof...(Entries);
  /// The tokens each of the model's token-major tensors holds at most (ctpipe/model/extent.hpp): a
  /// microbatch's extent is 1 to this many; 0 where every tensor has a fixed size.
  static constexpr std::size_t token_capacity = [] {
    if constexpr (checked)
      return checks::capacity;
    else
      return std::size_t{0};
  }();
  using layer_types = std::tuple<detail::checked_layer_t<checked, typename detail::entry<Entries>::layer>...>;
  /// For each layer, the layer whose parameters it shares (its entry is a ctpipe::shared_with<K, ...>:
  /// K), or -1 (ctpipe/model/shared.hpp).
  static constexpr std::array<int, size> shares = [] {
    std::array<int, size> s{detail::entry<Entries>::shares...};
    if (!checked) s.fill(-1);
    return s;
  }();
  template <std::size_t K>
  using layer_type = std::tuple_element_t<K, layer_types>;
  using input_type = typename layer_type<0>::input_type;
  using output_type = typename layer_type<size - 1>::output_type;

  /// Declared cost of each layer, in order.
  static constexpr std::array<double, size> costs = []<std::size_t... K>(std::index_sequence<K...>) {
    return std::array<double, size>{static_cast<double>(layer_type<K>::cost)...};
  }
  (std::index_sequence_for<Entries...>{});

  // Where layer C's input parts come from (none where a rule failed).
  template <std::size_t C>
  static constexpr auto sources() {
    if constexpr (checked)
      return checks::template sources<C>;
    else
      return std::array<detail::source, 0>{};
  }

  /// Every tensor that flows, consumer by consumer and input part by input part: where each input
  /// part of each layer comes from (ctpipe::edge).
  static constexpr auto edges = [] {
    constexpr std::size_t n = []<std::size_t... K>(std::index_sequence<K...>) {
      return (parts_v<typename layer_type<K>::input_type> + ...);
    }
    (std::index_sequence_for<Entries...>{});
    std::array<edge, n> e{};
    std::size_t at = 0;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      const auto add = [&]<std::size_t C>(std::integral_constant<std::size_t, C>) {
        using X = typename layer_type<C>::input_type;
        constexpr auto src = sources<C>();
        [&]<std::size_t... In>(std::index_sequence<In...>) {
          ((e[at++] = In < src.size()
                          ? edge{src[In].producer, src[In].output, static_cast<int>(C), static_cast<int>(In),
                                 detail::tensor_bytes<part_t<X, In>>(), detail::token_bytes_of<part_t<X, In>>()}
                          : edge{}),
           ...);
        }
        (std::make_index_sequence<parts_v<X>>{});
      };
      (add(std::integral_constant<std::size_t, K>{}), ...);
    }
    (std::index_sequence_for<Entries...>{});
    return e;
  }();

  /// True when every layer reads the previous layer's whole output and nothing else: a chain, as
  /// every executor runs (a model with skip connections or several sources runs in sequential_step).
  static constexpr bool is_chain = [] {
    for (const edge& x : edges)
      if (x.producer != x.consumer - 1 || x.output != x.input) return false;
    return true;
  }();

  boost::hana::tuple<detail::checked_layer_t<checked, typename detail::entry<Entries>::layer>...> layers{};

  template <std::size_t K>
  constexpr layer_type<K>& layer() {
    return boost::hana::at_c<K>(layers);
  }
  template <std::size_t K>
  constexpr const layer_type<K>& layer() const {
    return boost::hana::at_c<K>(layers);
  }
};

template <class T>
inline constexpr bool is_model_v = false;
template <class... L>
inline constexpr bool is_model_v<model<L...>> = true;

/// A ctpipe::model<...>.
template <class T>
concept model_type = is_model_v<std::remove_cvref_t<T>>;

namespace detail {
template <class M, std::size_t K, bool Inside = (K < M::size)>
struct boundary {
  using type = typename M::template layer_type<K>::input_type;
};
template <class M, std::size_t K>
struct boundary<M, K, false> {
  using type = typename M::output_type;
};
}  // namespace detail

/// The tensor between layer K-1 and layer K (K = 0: the model's input, K = size: its output).
template <model_type M, std::size_t K>
using boundary_t = typename detail::boundary<M, K>::type;

namespace detail {
template <class M, std::size_t First, std::size_t... K>
auto boundary_tuple(std::index_sequence<K...>) -> std::tuple<boundary_t<M, First + K>...>;
}  // namespace detail

/// The Count tensors from boundary First on: std::tuple<boundary_t<M, First>, ..., boundary_t<M, First + Count - 1>>.
template <model_type M, std::size_t First, std::size_t Count>
using boundaries_t = decltype(detail::boundary_tuple<M, First>(std::make_index_sequence<Count>{}));

/// Every tensor of one microbatch's pass through `M`: the input of each layer, then the output.
template <model_type M>
using activations_t = boundaries_t<M, 0, M::size + 1>;

namespace detail {
template <class M, std::size_t First, std::size_t... K>
auto saved_tuple(std::index_sequence<K...>) -> std::tuple<saved_t<typename M::template layer_type<First + K>>...>;
}  // namespace detail

/// What layers First .. First + Count - 1 keep for their backward, one microbatch's worth:
/// std::tuple<saved_t<layer First>, ...> (no_saved_state, no bytes to speak of, for a layer without).
template <model_type M, std::size_t First, std::size_t Count>
using saved_states_t = decltype(detail::saved_tuple<M, First>(std::make_index_sequence<Count>{}));

/// True when some layer of M has a saved_type.
template <model_type M>
inline constexpr bool has_saved_state_v = []<std::size_t... K>(std::index_sequence<K...>) {
  return (has_saved_state<typename M::template layer_type<K>> || ...);
}
(std::make_index_sequence<M::size>{});

/// Sets the gradients of one layer to zero (nothing for a layer without parameters).
template <class L>
constexpr void zero_layer_gradients(L& l) {
  if constexpr (has_parameters<L>) {
    auto g = l.gradients();
    std::fill(g.begin(), g.end(), typename decltype(g)::value_type{});
  }
}

/// Calls f(layer) for every layer of m, in order (each call with the layer's own type: f is
/// usually a generic lambda, `[](auto& l) { l.init(); }`).
template <model_type M, class F>
constexpr void for_each_layer(M& m, F&& f) {
  boost::hana::for_each(m.layers, f);
}

/// Calls f(parameters, gradients) for every layer that has parameters, in layer order.
template <model_type M, class F>
constexpr void for_each_parameter(M& m, F&& f) {
  for_each_layer(m, [&](auto& l) {
    if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>) f(l.parameters(), l.gradients());
  });
}

/// True when some layer of M is a device layer: its parameters are in device memory.
template <model_type M>
inline constexpr bool has_device_layer_v = []<std::size_t... K>(std::index_sequence<K...>) {
  return (device_layer_traits<typename M::template layer_type<K>>::claimed || ...);
}
(std::make_index_sequence<M::size>{});

/// Sets every gradient to zero (host layers; the host loops cannot touch device memory).
template <model_type M>
constexpr void zero_gradients(M& m) {
  static_assert(!has_device_layer_v<M>,
                "ctpipe::zero_gradients: the model has device layers, whose gradients are in device memory; the CUDA "
                "executor zeroes them itself at every step");
  for_each_layer(m, [](auto& l) { zero_layer_gradients(l); });
}

}  // namespace ctpipe
