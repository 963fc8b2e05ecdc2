// The shared host compute's F, B, I and W of a graph model's stage (exec/detail/host_compute.hpp
// declares them): each layer's input gathered from the stage's own layers' outputs and the
// messages it took in, a message made for each later stage it sends one, and on the way back the
// gradient terms later stages sent (the farthest first) and each layer's input gradient summed
// into its sources', in the order exec/detail/graph_stages.hpp gives (the sequential step's).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/exec/detail/host_compute.hpp>

namespace ctpipe::detail {

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, std::size_t K, class Act>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::gather(const typename gtypes::template inbox_t<S>& in,
                                                                        Act& act, int extent) {
  constexpr int layer = first_layer<S> + static_cast<int>(K);
  auto& x = std::get<K>(act.xs);
  each<parts_v<std::remove_cvref_t<decltype(x)>>>([&](auto in_part) {
    constexpr int i = wiring::edge_of(layer, static_cast<int>(decltype(in_part)::value));
    constexpr edge e = wiring::at(i);
    constexpr auto o = detail::ix(e.output);
    auto& to = part<decltype(in_part)::value>(x);
    if constexpr (wiring::crosses(e))
      assign_used(to,
                  bundle_part<detail::ix(wiring::wire_of(i))>(std::get<detail::ix(wiring::producer_stage(e)) + 1>(in)),
                  extent);
    else if constexpr (e.producer < 0)
      assign_used(to, part<o>(std::get<0>(in)), extent);
    else
      assign_used(to, part<o>(std::get<detail::ix(e.producer - first_layer<S>)>(act.ys)), extent);
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args, class Act>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_forward_layers(
    const Args& args, const typename gtypes::template inbox_t<S>& in, Act& act, saved_states<S>& s) {
  auto& w = self().template weights<S>(args);
  each<detail::ix(end_layer<S> - first_layer<S>)>([&](auto k) {
    constexpr std::size_t K = decltype(k)::value, layer = detail::ix(first_layer<S>) + K;
    gather<S, K>(in, act, extent_at<S>(args));
    detail::call_forward(w.template layer<layer>(), context_for<S, Op, layer>(args), std::get<K>(act.xs),
                         std::get<K>(act.ys), std::get<K>(s));
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, int B, class Act, class Message>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::make_message(const Act& act, Message& m, int extent) {
  each<detail::ix(wiring::wire_count(S, B))>([&](auto w) {
    constexpr edge e = wiring::at(wiring::wire_edge(S, B, static_cast<int>(decltype(w)::value)));
    constexpr auto o = detail::ix(e.output);
    if constexpr (e.producer < 0)
      assign_used(bundle_part<decltype(w)::value>(m), part<o>(std::get<0>(act.xs)), extent);
    else
      assign_used(bundle_part<decltype(w)::value>(m),
                  part<o>(std::get<detail::ix(e.producer - first_layer<S>)>(act.ys)), extent);
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_forward(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
  constexpr bool recompute = Stages.recompute[detail::ix(model_stage<S>)];
  auto& in = [&]() -> typename gtypes::template inbox_t<S>& {
    if constexpr (recompute)
      return st.stash[detail::ix(a.stash)];
    else
      return st.inbox;
  }();
  // What the stage takes in: the model's input, its neighbour's message, the crossings' messages.
  const int e = note_extent<S>(a);
  if constexpr (S == 0) {
    copy_message(std::get<0>(in), inputs_[a.microbatch], e);
  } else if constexpr (local_prev<S>) {
    copy_message(std::get<detail::ix(S)>(in),
                 value_of(std::get<detail::ix(S - 1)>(local_forward_)[detail::ix(a.local_in)]), e);
  } else {
    copy_message(std::get<detail::ix(S)>(in), value_of(self().template remote_input<S>(a)), e);
    self().template input_consumed<S>(a);
  }
  each<crossing_count>([&](auto k) {
    constexpr std::size_t K = decltype(k)::value;
    if constexpr (skip_to<K> == S) {
      auto& to = std::get<detail::ix(skip_from<K>) + 1>(in);
      if constexpr (skip_local<K>) {
        copy_message(to, value_of(std::get<K>(local_skip_value_)[detail::ix(skip_value_at<K>(a))]), e);
      } else {
        copy_message(to, value_of(self().template remote_skip_value<K>(skip_value_at<K>(a))), e);
        self().template skip_value_consumed<K>(skip_value_at<K>(a));
      }
    }
  });
  auto& act = [&]() -> auto& {
    if constexpr (recompute)
      return st.work;
    else
      return st.stash[detail::ix(a.stash)];
  }
  ();
  graph_forward_layers<S, op_kind::forward>(a, in, act, saved_for<S, !recompute>(a));
  if constexpr (forward_only && S == stage_count - 1) {
    constexpr auto top = detail::ix(end_layer<S> - first_layer<S> - 1);
    finish_forward<S>(a, std::get<top>(act.ys), std::get<top>(st.grads));
  }
  // What it gives: a message for each later stage it sends one, handed over here where that stage
  // is on this rank.
  each<detail::ix(stage_count - 1 - S)>([&](auto b) {
    constexpr int B = S + 1 + static_cast<int>(decltype(b)::value);
    if constexpr (sends<S, B>) make_message<S, B>(act, std::get<decltype(b)::value>(st.sendbox), e);
  });
  if constexpr (local_next<S>)
    put(std::get<detail::ix(S)>(local_forward_)[detail::ix(a.local_out)], std::get<0>(st.sendbox), e);
  each<crossing_count>([&](auto k) {
    constexpr std::size_t K = decltype(k)::value;
    if constexpr (skip_from<K> == S && skip_local<K>)
      put(std::get<K>(local_skip_value_)[detail::ix(skip_value_at<K>(a))],
          std::get<detail::ix(skip_to<K> - S - 1)>(st.sendbox), e);
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args>
inline auto& compute<Derived, Model, Stages, Loss, Layout, Only>::graph_activations_for(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
  if constexpr (Stages.recompute[detail::ix(model_stage<S>)]) {
    graph_forward_layers<S, Op>(a, st.stash[detail::ix(a.stash)], st.work,
                                saved_for<S, Op != op_kind::backward_weight>(a));
    return st.work;
  } else {
    return st.stash[detail::ix(a.stash)];
  }
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <bool Starts, class T>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::accumulate(T& to, const T& from) {
  if constexpr (Starts)
    to = from;
  else
    to += from;
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, int B, class Message, class Grads>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::take_gradients(const Message& m, Grads& g) {
  each<detail::ix(wiring::term_count(B, S))>([&](auto t) {
    constexpr int T = static_cast<int>(decltype(t)::value);
    constexpr edge e = wiring::at(wiring::term_edge(B, S, T));
    accumulate<wiring::term_starts(B, S, T)>(
        part<detail::ix(e.output)>(std::get<detail::ix(e.producer - first_layer<S>)>(g)),
        bundle_part<decltype(t)::value>(m));
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, std::size_t K, class Dx, class Grads, class Outbox>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::give_gradients(const Dx& dx, Grads& g, Outbox& out) {
  constexpr int layer = first_layer<S> + static_cast<int>(K);
  each<parts_v<Dx>>([&](auto in_part) {
    constexpr int i = wiring::edge_of(layer, static_cast<int>(decltype(in_part)::value));
    constexpr edge e = wiring::at(i);
    constexpr bool starts = wiring::contribution_starts(i);
    const auto& d = part<decltype(in_part)::value>(dx);
    if constexpr (e.producer < 0)
      return;
    else if constexpr (wiring::crosses(e))
      accumulate<starts>(
          bundle_part<detail::ix(wiring::term_of(i))>(std::get<detail::ix(wiring::producer_stage(e))>(out)), d);
    else
      accumulate<starts>(part<detail::ix(e.output)>(std::get<detail::ix(e.producer - first_layer<S>)>(g)), d);
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, bool Input, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_backward(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
  constexpr int layers = end_layer<S> - first_layer<S>;
  constexpr op_kind op = Input ? op_kind::backward_input : op_kind::backward;
  auto& act = graph_activations_for<S, op>(a);
  auto& saved = saved_for<S, true>(a);
  auto& g = [&]() -> auto& {
    if constexpr (Input)
      return st.grad_stash[detail::ix(a.stash)];
    else
      return st.grads;
  }
  ();
  // (Every name below depends on B, so that clang instantiates nothing of a discarded branch.)
  each<detail::ix(stage_count - 1 - S)>([&](auto r) {
    constexpr int B = stage_count - 1 - static_cast<int>(decltype(r)::value);  // the farthest first
    if constexpr (B == S + 1 && local_next<S>) {
      take_gradients<S, B>(value_of(std::get<detail::ix(B - 1)>(local_backward_)[detail::ix(a.local_in)]), g);
    } else if constexpr (B == S + 1) {
      take_gradients<S, B>(value_of(self().template remote_gradient<B - 1>(a)), g);
      self().template gradient_consumed<B - 1>(a);
    } else if constexpr (sends<S, B>) {
      constexpr std::size_t K = skip_index(S, B);
      if constexpr (skip_local<K>) {
        take_gradients<S, B>(value_of(std::get<K>(local_skip_gradient_)[detail::ix(skip_gradient_at<K>(a))]), g);
      } else {
        take_gradients<S, B>(value_of(self().template remote_skip_gradient<K>(skip_gradient_at<K>(a))), g);
        self().template skip_gradient_consumed<K>(skip_gradient_at<K>(a));
      }
    }
  });
  if constexpr (S == stage_count - 1) {
    constexpr auto top = detail::ix(layers - 1);
    take_loss<S, op>(a, std::get<top>(act.ys), std::get<top>(g));
  }
  auto& w = self().template weights<S>(a);
  each<detail::ix(layers)>([&](auto r) {
    constexpr std::size_t K = detail::ix(layers - 1) - decltype(r)::value, layer = detail::ix(first_layer<S>) + K;
    auto& l = w.template layer<layer>();
    constexpr bool split = Input && splittable_layer<std::remove_cvref_t<decltype(l)>>;
    detail::call_backward<split>(l, context_for<S, op, layer>(a), std::get<K>(act.xs), std::get<K>(act.ys),
                                 std::get<K>(saved), std::get<K>(g), std::get<K>(st.dxs));
    give_gradients<S, K>(std::get<K>(st.dxs), g, st.outbox);
  });
  const int e = extent_at<S>(a);
  note_gradient_extent<S>(e);
  if constexpr (local_prev<S>)
    put(std::get<detail::ix(S - 1)>(local_backward_)[detail::ix(a.local_out)], std::get<detail::ix(S - 1)>(st.outbox),
        e);
  each<crossing_count>([&](auto k) {
    constexpr std::size_t K = decltype(k)::value;
    if constexpr (skip_to<K> == S && skip_local<K>)
      put(std::get<K>(local_skip_gradient_)[detail::ix(skip_gradient_at<K>(a))],
          std::get<detail::ix(skip_from<K>)>(st.outbox), e);
  });
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_weight_gradients(const Args& a) {
  using layers = std::make_index_sequence<detail::ix(end_layer<S> - first_layer<S>)>;
  if constexpr (any_splits<S>(layers{})) {
    auto& act = graph_activations_for<S, op_kind::backward_weight>(a);
    const auto& s = saved_for<S, true>(a);
    const auto& g = std::get<detail::ix(S)>(storage_).grad_stash[detail::ix(a.stash)];
    auto& w = self().template weights<S>(a);
    each<layers::size()>([&](auto k) {
      constexpr std::size_t K = decltype(k)::value, layer = detail::ix(first_layer<S>) + K;
      auto& l = w.template layer<layer>();
      if constexpr (splittable_layer<std::remove_cvref_t<decltype(l)>>)
        detail::call_backward_weight(l, context_for<S, op_kind::backward_weight, layer>(a), std::get<K>(act.xs),
                                     std::get<K>(act.ys), std::get<K>(s), std::get<K>(g));
    });
  }
}

}  // namespace ctpipe::detail
