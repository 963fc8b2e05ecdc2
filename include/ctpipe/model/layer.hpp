// The layer and loss concepts: what a functor type must provide to run in a ctpipe pipeline.
//
// A layer maps an input_type to an output_type. Its backward gets the stashed input and output,
// the gradient of the output, writes the gradient of the input and adds its weight gradients to
// whatever it holds (accumulation across microbatches is the layer's `+=`; the executor calls it in
// microbatch order). Its cost is a compile-time number used to balance stages.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

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

/// forward(x, y): y = f(x).
template <class L>
concept has_forward = has_layer_types<L> &&
    requires(L& l, const typename L::input_type& x, typename L::output_type& y) {
  l.forward(x, y);
};

/// backward(x, y, dy, dx): dx = dL/dx, and weight gradients += dL/dw.
template <class L>
concept has_backward = has_layer_types<L> &&
    requires(L& l, const typename L::input_type& x, const typename L::output_type& y, const typename L::output_type& dy,
             typename L::input_type& dx) {
  l.backward(x, y, dy, dx);
};

/// A pipeline layer. Its tensors must be default-constructible and copy-assignable: the executor
/// allocates them once and copies them across ranks.
template <class L>
concept layer =
    has_layer_types<L> && has_constant_cost<L> && has_forward<L> && has_backward<L> && std::default_initializable<L> &&
    std::semiregular<typename L::input_type> && std::semiregular<typename L::output_type>;

/// The hook through which another kind of layer joins a model without the model layer knowing it:
/// the CUDA executor's device layers (ctpipe/cuda/layer.hpp) specialise it. `claimed`: L is meant as
/// a layer of that kind (it has that kind's forward or backward), so the host layer rules do not
/// apply to it; instantiating `valid` checks that kind's own rules (with its own messages) and says
/// whether L keeps them. Such layers keep their parameters where host loops must not touch them
/// (sgd_step and zero_gradients refuse them).
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
  if constexpr (std::is_class_v<L> && !std::is_final_v<L>)
    return !requires { &split_backward_mixin<L>::backward_input; } ||
           !requires { &split_backward_mixin<L>::backward_weight; };
  else
    return requires { &L::backward_input; } || requires { &L::backward_weight; };
}

}  // namespace detail

/// L declares a member named backward_input or backward_weight (with any signature): it means to
/// split its backward, so the model's rules hold it to the split signatures (a near miss is an
/// error, never a layer that silently runs its whole backward at I).
template <class L>
concept declares_split_backward = detail::names_split_backward<L>();

/// A layer whose backward can be split into an input-gradient part (I: backward_input writes dx)
/// and a weight-gradient part (W: backward_weight adds the weight gradients), for the schedules
/// with split backward. Both get what they need from the stash: the stage's activations, and the
/// output gradient the I received. An executor runs a layer that does not split as a whole at I,
/// and nothing of it at W; a layer that declares either function must declare both, with these
/// signatures (model<...> says so otherwise).
template <class L>
concept splittable_layer = layer<L> && requires(L& l, const typename L::input_type& x, const typename L::output_type& y,
                                                const typename L::output_type& dy, typename L::input_type& dx) {
  l.backward_input(x, y, dy, dx);
  l.backward_weight(x, y, dy);
};

/// A loss: `double operator()(const Output& y, const target_type& t, Output& dy)` returns the loss of
/// one microbatch and writes its gradient with respect to y.
template <class F, class Output>
concept loss_function = requires(F& f, const Output& y, const typename F::target_type& t, Output& dy) {
  typename F::target_type;
  { f(y, t, dy) } -> std::convertible_to<double>;
};

}  // namespace ctpipe
