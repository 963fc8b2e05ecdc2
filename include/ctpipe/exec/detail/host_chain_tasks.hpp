// The shared host compute's tasks (exec/detail/host_compute.hpp declares them): each compute op's
// code (a chain's stage's here, a graph stage's in host_graph_tasks.hpp), the layers' context and
// saved state a task gives them, and a chain's stage's F, B, I and W: the stage's input taken in (the model's, a
// neighbour's on this rank, or a message), its layers run forward into the stash slot (or recomputed from its input),
// the loss taken on the last stage, the layers' backward from the top down (an I keeping its gradients for its W), and
// the frozen prefix run forward only.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/exec/detail/host_compute.hpp>

namespace ctpipe::detail {

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int R, op_kind Op, int S, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::run_compute(const Args& a) {
  if constexpr (graph && Op == op_kind::forward)
    guarded<R, Op, S>(a, [&] { graph_forward<S>(a); });
  else if constexpr (graph && Op == op_kind::backward)
    guarded<R, Op, S>(a, [&] { graph_backward<S, false>(a); });
  else if constexpr (graph && Op == op_kind::backward_input)
    guarded<R, Op, S>(a, [&] { graph_backward<S, true>(a); });
  else if constexpr (graph && Op == op_kind::backward_weight)
    guarded<R, Op, S>(a, [&] { graph_weight_gradients<S>(a); });
  else if constexpr (Op == op_kind::forward)
    guarded<R, Op, S>(a, [&] { forward<S>(a); });
  else if constexpr (Op == op_kind::backward)
    guarded<R, Op, S>(a, [&] { backward<S, false>(a); });
  else if constexpr (Op == op_kind::backward_input)
    guarded<R, Op, S>(a, [&] { backward<S, true>(a); });
  else if constexpr (Op == op_kind::backward_weight)
    guarded<R, Op, S>(a, [&] { weight_gradients<S>(a); });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, std::size_t Layer, class Args>
inline auto compute<Derived, Model, Stages, Loss, Layout, Only>::context_for(const Args& a) const noexcept {
  return [this, &a] {
    constexpr int m = Layout.microbatches;
    if constexpr (requires { a.global; })
      return context{rank_of<S>,
                     S,
                     static_cast<int>(Layer),
                     first_microbatch_ + a.global % m,
                     Op,
                     pipeline_step_ + static_cast<std::uint64_t>(a.global / m),
                     extent_at<S>(a),
                     !forward_only};
    else
      return context{rank_of<S>, S,     static_cast<int>(Layer), first_microbatch_ + a.microbatch,
                     Op,         step_, extent_at<S>(a),         !forward_only};
  };
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, bool Slot, class Args>
inline auto compute<Derived, Model, Stages, Loss, Layout, Only>::saved_for(const Args& a) -> saved_states<S>& {
  auto& st = std::get<detail::ix(S)>(storage_);
  if constexpr (!keeps<S>)
    return no_saved_<S>;
  else if constexpr (Slot && storage_t<S>::per_slot)
    return st.saved[detail::ix(a.stash)];
  else
    return st.work_saved;
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args, std::size_t... K>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::run_forward_layers(const Args& args, full_t<S>& a,
                                                                                    saved_states<S>& s,
                                                                                    std::index_sequence<K...>) {
  auto& w = self().template weights<S>(args);
  (detail::call_forward(w.template layer<detail::ix(first_layer<S>) + K>(),
                        context_for<S, Op, detail::ix(first_layer<S>) + K>(args), std::get<K>(a), std::get<K + 1>(a),
                        std::get<K>(s)),
   ...);
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::forward(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
  constexpr bool recompute = Stages.recompute[detail::ix(model_stage<S>)];
  auto& act = [&]() -> full_t<S>& {
    if constexpr (recompute)
      return st.work;
    else
      return st.stash[detail::ix(a.stash)];
  }();
  auto& x = std::get<0>(act);
  const int e = note_extent<S>(a);
  if constexpr (first_of_chain<S> && (frozen == 0 || S > 0))
    copy_message(x, inputs_[a.microbatch], e);
  else if constexpr (S == 0)
    run_prefix(a, x);
  else if constexpr (local_prev<S>)
    copy_message(x, value_of(std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)]), e);
  else {
    copy_message(x, value_of(self().template remote_input<S>(a)), e);
    self().template input_consumed<S>(a);
  }
  if constexpr (recompute) copy_message(st.stash[detail::ix(a.stash)], x, e);
  run_forward_layers<S, op_kind::forward>(a, act, saved_for<S, !recompute>(a),
                                          std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
  if constexpr (forward_only && last_of_chain<S>) {
    constexpr std::size_t top = detail::ix(end_layer<S> - first_layer<S>);
    finish_forward<S>(a, std::get<top>(act), std::get<top>(st.grads));
  }
  if constexpr (local_next<S>)
    put(std::get<detail::ix(S)>(local_forward_)[detail::ix(a.local_out)],
        std::get<std::tuple_size_v<full_t<S>> - 1>(act), e);
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::run_prefix(const Args& a, prefix_type& x) {
  const auto i = detail::ix(a.microbatch);
  if (prefix_in_ != nullptr && prefix_in_[i] != nullptr) {
    x = *prefix_in_[i];
    return;
  }
  auto& t = prefix_.value;
  copy_message(std::get<0>(t), inputs_[a.microbatch], extent_at<0>(a));
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (detail::call_forward(model_.template layer<K>(), context_for<0, op_kind::forward, K>(a), std::get<K>(t),
                          std::get<K + 1>(t), std::get<K>(prefix_.saved)),
     ...);
  }
  (std::make_index_sequence<detail::ix(frozen)>{});
  x = std::get<detail::ix(frozen)>(t);
  if (prefix_out_ != nullptr && prefix_out_[i] != nullptr) *prefix_out_[i] = x;
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, bool Input, std::size_t K, class Args, class Dy>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::run_backward_layers(const Args& args, full_t<S>& a,
                                                                                     saved_states<S>& s, full_t<S>& g,
                                                                                     const Dy& dy) {
  // K past the stage's layers: an empty stage, which only the stand-in for a refused stage plan
  // has (detail::usable_stages); compiling nothing here keeps that plan's message the only one.
  if constexpr (K < detail::ix(end_layer<S> - first_layer<S>)) {
    constexpr std::size_t layer = detail::ix(first_layer<S>) + K;
    auto& l = self().template weights<S>(args).template layer<layer>();
    constexpr bool split = Input && splittable_layer<std::remove_cvref_t<decltype(l)>>;
    constexpr op_kind op = Input ? op_kind::backward_input : op_kind::backward;
    detail::call_backward<split>(l, context_for<S, op, layer>(args), std::get<K>(a), std::get<K + 1>(a), std::get<K>(s),
                                 dy, std::get<K>(g));
    if constexpr (K > 0) run_backward_layers<S, Input, K - 1>(args, a, s, g, std::get<K>(g));
  }
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args>
inline auto compute<Derived, Model, Stages, Loss, Layout, Only>::activations(const Args& a) -> full_t<S>& {
  auto& st = std::get<detail::ix(S)>(storage_);
  if constexpr (Stages.recompute[detail::ix(model_stage<S>)]) {
    std::get<0>(st.work) = st.stash[detail::ix(a.stash)];
    run_forward_layers<S, Op>(a, st.work, saved_for<S, Op != op_kind::backward_weight>(a),
                              std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>{});
    return st.work;
  } else {
    return st.stash[detail::ix(a.stash)];
  }
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, bool Input, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::backward(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
  constexpr std::size_t top = detail::ix(end_layer<S> - first_layer<S>);  // index of the output in full_t
  constexpr op_kind op = Input ? op_kind::backward_input : op_kind::backward;
  auto& act = activations<S, op>(a);
  auto& saved = saved_for<S, true>(a);
  auto& g = [&]() -> full_t<S>& {
    if constexpr (Input)
      return st.grad_stash[detail::ix(a.stash)];
    else
      return st.grads;
  }();
  const int e = extent_at<S>(a);
  if constexpr (last_of_chain<S>) {
    take_loss<S, op>(a, std::get<top>(act), std::get<top>(g));
    run_backward_layers<S, Input, top - 1>(a, act, saved, g, std::get<top>(g));
  } else if constexpr (local_next<S>) {
    const auto& dy = value_of(std::get<detail::ix(S)>(local_backward_)[detail::ix(a.local_in)]);
    if constexpr (Input) copy_message(std::get<top>(g), dy, e);
    run_backward_layers<S, Input, top - 1>(a, act, saved, g, dy);
  } else {
    const auto& dy = value_of(self().template remote_gradient<S>(a));
    if constexpr (Input) copy_message(std::get<top>(g), dy, e);
    run_backward_layers<S, Input, top - 1>(a, act, saved, g, dy);
    self().template gradient_consumed<S>(a);
  }
  note_gradient_extent<S>(e);
  if constexpr (Input && !first_of_chain<S> && !local_prev<S>)
    copy_message(std::get<0>(st.grads), std::get<0>(g), e);  // for SEND_B
  if constexpr (local_prev<S>)
    put(std::get<detail::ix(S - 1)>(local_backward_)[detail::ix(a.local_out)], std::get<0>(g), e);
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args, class Y>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::take_loss(const Args& a, const Y& y, Y& dy) {
  losses_[detail::ix(a.microbatch)] =
      detail::call_loss(loss_, context_for<S, Op, Model::size>(a), y, targets_[a.microbatch], dy);
  if constexpr (extents) tokens_[detail::ix(a.microbatch)] = extent_at<S>(a);
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args, class Y>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::finish_forward(const Args& a, const Y& y, Y& scratch) {
  if (targets_ != nullptr) take_loss<S, op_kind::forward>(a, y, scratch);
  if constexpr (std::is_same_v<Y, output_type>)
    if (outputs_ != nullptr) copy_message(outputs_[a.microbatch], y, extent_at<S>(a));
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args, std::size_t... K>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::run_weight_layers(const Args& args, full_t<S>& a,
                                                                                   const saved_states<S>& s,
                                                                                   const full_t<S>& g,
                                                                                   std::index_sequence<K...>) {
  auto& w = self().template weights<S>(args);
  auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
    constexpr std::size_t layer = detail::ix(first_layer<S>) + J;
    auto& l = w.template layer<layer>();
    if constexpr (splittable_layer<std::remove_cvref_t<decltype(l)>>)
      detail::call_backward_weight(l, context_for<S, op_kind::backward_weight, layer>(args), std::get<J>(a),
                                   std::get<J + 1>(a), std::get<J>(s), std::get<J + 1>(g));
  };
  (one(std::integral_constant<std::size_t, K>{}), ...);
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::weight_gradients(const Args& a) {
  using layers = std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>;
  if constexpr (any_splits<S>(layers{})) {  // else its I ran the whole backward: nothing to recompute either
    auto& act = activations<S, op_kind::backward_weight>(a);
    run_weight_layers<S>(a, act, saved_for<S, true>(a),
                         std::get<detail::ix(S)>(storage_).grad_stash[detail::ix(a.stash)], layers{});
  }
}

}  // namespace ctpipe::detail
