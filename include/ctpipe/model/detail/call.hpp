// How a host layer is called, whatever form it takes (see model/layer.hpp): with or without the
// task's context first, with or without its saved state. Each function builds the context (by
// calling `ctx`) only for a layer that takes one, so a plain layer's call is what it always was.
#pragma once

#include <type_traits>

#include <ctpipe/model/layer.hpp>

namespace ctpipe::detail {

// Call(l, [ctx(),] x, y, [s,] rest...), in the form L takes it.
// (A model that broke one of its rules holds stand-ins for its layers, and has said so once: the
// code built around it calls nothing, so that its message stays the only one.)
template <class Call, class L, class Ctx, class X, class Y, class S, class... Rest>
void call_layer(L& l, const Ctx& ctx, X& x, Y& y, S& s, Rest&... rest) {
  constexpr bool with_context = form<L, Call>() == call_form::with_context;
  if constexpr (std::is_same_v<std::remove_const_t<L>, stand_in_layer>)
    return;
  else if constexpr (has_saved_state<L> && with_context)
    Call::call(l, ctx(), x, y, s, rest...);
  else if constexpr (has_saved_state<L>)
    Call::call(l, x, y, s, rest...);
  else if constexpr (with_context)
    Call::call(l, ctx(), x, y, rest...);
  else
    Call::call(l, x, y, rest...);
}

template <class L, class Ctx>
void call_forward(L& l, const Ctx& ctx, const typename L::input_type& x, typename L::output_type& y, saved_t<L>& s) {
  call_layer<forward_call>(l, ctx, x, y, s);
}

// backward (Input false) or backward_input (Input true, which may add to s what its W needs).
template <bool Input, class L, class Ctx>
void call_backward(L& l, const Ctx& ctx, const typename L::input_type& x, const typename L::output_type& y,
                   std::conditional_t<Input, saved_t<L>&, const saved_t<L>&> s, const typename L::output_type& dy,
                   typename L::input_type& dx) {
  call_layer<std::conditional_t<Input, backward_input_call, backward_call>>(l, ctx, x, y, s, dy, dx);
}

template <class L, class Ctx>
void call_backward_weight(L& l, const Ctx& ctx, const typename L::input_type& x, const typename L::output_type& y,
                          const saved_t<L>& s, const typename L::output_type& dy) {
  call_layer<backward_weight_call>(l, ctx, x, y, s, dy);
}

// The loss of one microbatch, in the form F takes it (with the context first, or without).
template <class F, class Ctx, class Y, class T>
double call_loss(F& f, const Ctx& ctx, const Y& y, const T& t, Y& dy) {
  if constexpr (std::is_same_v<Y, stand_in_layer::tensor>)
    return 0.0;  // (a model that broke a rule: see call_layer)
  else if constexpr (requires(const context& c) { f(c, y, t, dy); })
    return static_cast<double>(f(ctx(), y, t, dy));
  else
    return static_cast<double>(f(y, t, dy));
}

}  // namespace ctpipe::detail
