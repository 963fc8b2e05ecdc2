// The layer and loss concepts: what a functor type must provide to run in a ctpipe pipeline.
//
// A layer maps an input_type to an output_type. Its backward gets the stashed input and output,
// the gradient of the output, writes the gradient of the input and adds its weight gradients to
// whatever it holds (accumulation across microbatches is the layer's `+=`; the executor calls it in
// microbatch order). Its cost is a compile-time number used to balance stages.
//
// A layer may also keep what its backward needs beyond x and y (a `saved_type`: its forward writes
// one per microbatch, the executor stashes it until the microbatch's last backward reads it), and
// any of its calls may take the task's context first (`const ctpipe::context&`: rank, stage, layer,
// microbatch, op, step, and a random stream of its own).
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include <ctpipe/model/context.hpp>

namespace ctpipe {

/// Member types input_type and output_type.
template <class L>
concept has_layer_types = requires {
  typename L::input_type;
  typename L::output_type;
};

/// A declared cost, readable at compile time: `static constexpr double cost = ...;`
template <class L>
concept has_constant_cost = requires {
  { L::cost } -> std::convertible_to<double>;
  typename std::bool_constant<(static_cast<double>(L::cost) > 0.0)>;  // readable in a constant expression
};

/// A layer that keeps state for its backward: a member type saved_type.
template <class L>
concept has_saved_state = requires {
  typename L::saved_type;
};

/// What a layer without a saved_type keeps: nothing (no bytes in a stash).
struct no_saved_state {
  constexpr bool operator==(const no_saved_state&) const = default;
};

namespace detail {

// What a model holds in place of its layers where one of its rules failed, so that the failed
// rule's message is the only one (model/model.hpp; the calls of model/detail/call.hpp skip it).
struct stand_in_layer {
  struct tensor {};
  using input_type = tensor;
  using output_type = tensor;
  static constexpr double cost = 0;
};
template <class L>
struct saved_of {
  using type = no_saved_state;
};
template <has_saved_state L>
struct saved_of<L> {
  using type = typename L::saved_type;
};
}  // namespace detail

/// The state L keeps per microbatch: its saved_type, or no_saved_state.
template <class L>
using saved_t = typename detail::saved_of<L>::type;

namespace detail {

// How a layer takes one of its calls: not at all, as written in the concepts below, or with the
// task's context first.
enum class call_form { none, plain, with_context };

// The four calls, by name.
struct forward_call {
  template <class L, class... A>
  static auto call(L& l, A&&... a) -> decltype(l.forward(static_cast<A&&>(a)...)) {
    return l.forward(static_cast<A&&>(a)...);
  }
};
struct backward_call {
  template <class L, class... A>
  static auto call(L& l, A&&... a) -> decltype(l.backward(static_cast<A&&>(a)...)) {
    return l.backward(static_cast<A&&>(a)...);
  }
};
struct backward_input_call {
  template <class L, class... A>
  static auto call(L& l, A&&... a) -> decltype(l.backward_input(static_cast<A&&>(a)...)) {
    return l.backward_input(static_cast<A&&>(a)...);
  }
};
struct backward_weight_call {
  template <class L, class... A>
  static auto call(L& l, A&&... a) -> decltype(l.backward_weight(static_cast<A&&>(a)...)) {
    return l.backward_weight(static_cast<A&&>(a)...);
  }
};

// How L takes Call(x, y, rest...), or, where L has a saved_type, Call(x, y, s, rest...).
template <class Call, class L, class X, class Y, class S, class... Rest>
constexpr call_form form_of() {
  if constexpr (has_saved_state<L>) {
    if constexpr (requires(L & l, const context& c, X x, Y y, S s, Rest... r) { Call::call(l, c, x, y, s, r...); })
      return call_form::with_context;
    else if constexpr (requires(L & l, X x, Y y, S s, Rest... r) { Call::call(l, x, y, s, r...); })
      return call_form::plain;
    else
      return call_form::none;
  } else {
    if constexpr (requires(L & l, const context& c, X x, Y y, Rest... r) { Call::call(l, c, x, y, r...); })
      return call_form::with_context;
    else if constexpr (requires(L & l, X x, Y y, Rest... r) { Call::call(l, x, y, r...); })
      return call_form::plain;
    else
      return call_form::none;
  }
}

// Each call's arguments: forward(x, y[, s]), backward(x, y[, s], dy, dx), backward_input(x, y[, s],
// dy, dx), backward_weight(x, y[, s], dy); s is const but for forward and backward_input (which
// may keep in it what its W needs).
template <class L, class Call>
constexpr call_form form() {
  if constexpr (!has_layer_types<L>) {
    return call_form::none;
  } else {
    using X = const typename L::input_type&;
    using Y = const typename L::output_type&;
    using DX = typename L::input_type&;
    if constexpr (std::is_same_v<Call, forward_call>)
      return form_of<Call, L, X, typename L::output_type&, saved_t<L>&>();
    else if constexpr (std::is_same_v<Call, backward_call>)
      return form_of<Call, L, X, Y, const saved_t<L>&, Y, DX>();
    else if constexpr (std::is_same_v<Call, backward_input_call>)
      return form_of<Call, L, X, Y, saved_t<L>&, Y, DX>();
    else
      return form_of<Call, L, X, Y, const saved_t<L>&, Y>();
  }
}

}  // namespace detail

/// forward(x, y): y = f(x); with a saved_type, forward(x, y, saved_type& s) also writes what the
/// backward needs. Either may take `const ctpipe::context&` first.
template <class L>
concept has_forward = detail::form<L, detail::forward_call>()
!= detail::call_form::none;

/// backward(x, y, dy, dx): dx = dL/dx, and weight gradients += dL/dw; with a saved_type,
/// backward(x, y, const saved_type& s, dy, dx). Either may take `const ctpipe::context&` first.
template <class L>
concept has_backward = detail::form<L, detail::backward_call>()
!= detail::call_form::none;

/// A pipeline layer. Its tensors must be default-constructible and copy-assignable: the executor
/// allocates them once and copies them across ranks.
template <class L>
concept layer = has_layer_types<L> && has_constant_cost<L> && has_forward<L> && has_backward<L> &&
    std::default_initializable<L> && std::semiregular<typename L::input_type> &&
    std::semiregular<typename L::output_type> && std::semiregular<saved_t<L>>;

/// The hook through which another kind of layer joins a model without the model layer knowing it:
/// the CUDA executor's device layers (ctpipe/cuda/layer.hpp) specialise it. `claimed`: L is meant as
/// a layer of that kind (it has that kind's forward or backward), so the host layer rules do not
/// apply to it; `valid` says whether L keeps that kind's own rules, and `test()` (which the model
/// calls for a claimed layer) checks them, one message per broken rule, and returns `valid`. Such layers keep their
/// parameters where host loops must not touch them (sgd_step and zero_gradients refuse them).
template <class L>
struct device_layer_traits {
  static constexpr bool claimed = false;
  static constexpr bool valid = false;
};

/// The same hook for losses: `valid` where F is a loss of that kind for Output (the CUDA executor's
/// device losses, ctpipe/cuda/layer.hpp, specialise it).
template <class F, class Output>
struct device_loss_traits {
  static constexpr bool valid = false;
};

/// A host layer, or a layer of a kind that claimed it through device_layer_traits: what a model may
/// hold.
template <class L>
concept any_layer = layer<L> || device_layer_traits<L>::valid;

/// A layer with parameters: parameters() and gradients() give spans of the same length and type.
template <class L>
concept has_parameters = requires(L& l) {
  { l.parameters() } -> std::convertible_to<std::span<typename decltype(l.parameters())::element_type>>;
  { l.gradients() } -> std::same_as<decltype(l.parameters())>;
};

namespace detail {

// Whether L declares a member of a name, whatever its signature (overloads and templates included):
// in a class deriving from L and from a probe that declares the name, the name is ambiguous exactly
// when L declares it too. A final class cannot be derived from: there, what a member pointer finds
// (a single, non-template overload).
struct split_backward_probe {
  void backward_input();
  void backward_weight();
};
template <class L>
struct split_backward_mixin : L, split_backward_probe {};

template <class L>
constexpr bool names_split_backward() {
  if constexpr (std::is_class_v<L> && !std::is_final_v<L>) return !requires {
      &split_backward_mixin<L>::backward_input;
    }
  || !requires { &split_backward_mixin<L>::backward_weight; };
  else return requires {
    &L::backward_input;
  }
  || requires { &L::backward_weight; };
}

}  // namespace detail

/// L declares a member named backward_input or backward_weight (with any signature): it means to
/// split its backward, so the model's rules hold it to the split signatures (a near miss is an
/// error, never a layer that silently runs its whole backward at I).
template <class L>
concept declares_split_backward = detail::names_split_backward<L>();

/// A layer whose backward can be split into an input-gradient part (I: backward_input(x, y, dy, dx)
/// writes dx) and a weight-gradient part (W: backward_weight(x, y, dy) adds the weight gradients),
/// for the schedules with split backward. Both get what they need from the stash: the stage's
/// activations, and the output gradient the I received; with a saved_type, s after y
/// (backward_input(x, y, saved_type& s, dy, dx), which may keep in s what its W needs, and
/// backward_weight(x, y, const saved_type& s, dy)). Each may take `const ctpipe::context&` first. An
/// executor runs a layer that does not split as a whole at I, and nothing of it at W; a layer that
/// declares either function must declare both, with these signatures (model<...> says so otherwise).
template <class L>
concept splittable_layer = layer<L> && detail::form<L, detail::backward_input_call>()
!= detail::call_form::none&& detail::form<L, detail::backward_weight_call>() != detail::call_form::none;

/// A loss: `double operator()(const Output& y, const target_type& t, Output& dy)` returns the loss of
/// one microbatch and writes its gradient with respect to y. It may take `const ctpipe::context&`
/// first (a loss over a microbatch's extent reads it there).
template <class F, class Output>
concept loss_function = requires {
  typename F::target_type;
}
&&(
    requires(F& f, const Output& y, const typename F::target_type& t, Output& dy) {
      { f(y, t, dy) } -> std::convertible_to<double>;
    } ||
    requires(F & f, const context& c, const Output& y, const typename F::target_type& t, Output& dy) {
      { f(c, y, t, dy) } -> std::convertible_to<double>;
    });

}  // namespace ctpipe
