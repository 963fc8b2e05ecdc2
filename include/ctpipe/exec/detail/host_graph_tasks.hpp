// The shared host compute's F, B, I and W of a graph model's stage (exec/detail/host_compute.hpp
// declares them), on host tensors: the walk of exec/detail/graph_walk.hpp (what an F takes in and
// sends, the order of a B's sums) with the host's primitives: each layer's input parts copied from
// their sources, a message's tensors copied in, each gradient term copied or added.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/exec/detail/host_compute.hpp>

namespace ctpipe::detail {

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, part_link L, class Act>
inline auto& compute<Derived, Model, Stages, Loss, Layout, Only>::source(const typename gtypes::template inbox_t<S>& in,
                                                                         const Act& act) {
  if constexpr (L.stage >= 0)
    return bundle_part<detail::ix(L.wire)>(std::get<detail::ix(L.stage) + 1>(in));
  else if constexpr (L.layer < 0)
    return part<detail::ix(L.output)>(std::get<0>(in));
  else
    return part<detail::ix(L.output)>(std::get<detail::ix(L.layer - first_layer<S>)>(act.ys));
}

template <class Derived, model_type Model, auto Stages, class Loss, auto Layout, int Only>
template <int S, op_kind Op, class Args, class Act>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_forward_layers(
    const Args& args, const typename gtypes::template inbox_t<S>& in, Act& act, saved_states<S>& s) {
  auto& w = self().template weights<S>(args);
  const int e = extent_at<S>(args);
  walk::template each_layer<S>([&](auto layer) {
    constexpr int L = decltype(layer)::value;
    constexpr std::size_t K = detail::ix(L - first_layer<S>);
    auto& x = std::get<K>(act.xs);
    walk::template each_input<L>([&](auto p, auto l) {
      assign_used(part<detail::ix(decltype(p)::value)>(x), source<S, decltype(l)::value>(in, act), e);
    });
    detail::call_forward(w.template layer<detail::ix(L)>(), context_for<S, Op, detail::ix(L)>(args), x,
                         std::get<K>(act.ys), std::get<K>(s));
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
  auto& act = [&]() -> auto& {
    if constexpr (recompute)
      return st.work;
    else
      return st.stash[detail::ix(a.stash)];
  }
  ();
  auto& saved = saved_for<S, !recompute>(a);
  const int e = note_extent<S>(a);
  if constexpr (S == 0) copy_message(std::get<0>(in), inputs_[a.microbatch], e);
  walk::template forward<S>(
      [&](auto from) {  // the message of earlier stage A (every name depends on A: see graph_backward)
        constexpr int A = decltype(from)::value;
        auto& to = std::get<detail::ix(A) + 1>(in);
        if constexpr (A == S - 1 && local_prev<S>) {
          copy_message(to, value_of(std::get<detail::ix(A)>(local_forward_)[detail::ix(a.local_in)]), e);
        } else if constexpr (A == S - 1) {
          copy_message(to, value_of(self().template remote_input<A + 1>(a)), e);
          self().template input_consumed<A + 1>(a);
        } else if constexpr (skip_local<skip_index(A, S)>) {
          constexpr std::size_t K = skip_index(A, S);
          copy_message(to, value_of(std::get<K>(local_skip_value_)[detail::ix(skip_value_at<K>(a))]), e);
        } else {
          constexpr std::size_t K = skip_index(A, S);
          copy_message(to, value_of(self().template remote_skip_value<K>(skip_value_at<K>(a))), e);
          self().template skip_value_consumed<K>(skip_value_at<K>(a));
        }
      },
      [&] { graph_forward_layers<S, op_kind::forward>(a, in, act, saved); },
      [&](auto b, auto w, auto l) {
        assign_used(
            bundle_part<detail::ix(decltype(w)::value)>(std::get<detail::ix(decltype(b)::value - S - 1)>(st.sendbox)),
            source<S, decltype(l)::value>(in, act), e);
      });
  if constexpr (forward_only && S == stage_count - 1) {
    constexpr auto top = detail::ix(end_layer<S> - first_layer<S> - 1);
    finish_forward<S>(a, std::get<top>(act.ys), std::get<top>(st.grads));
  }
  // The messages for later stages on this rank, handed over here.
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
template <int S, bool Input, class Args>
inline void compute<Derived, Model, Stages, Loss, Layout, Only>::graph_backward(const Args& a) {
  auto& st = std::get<detail::ix(S)>(storage_);
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
  // The gradient of output part O of layer L (of this stage).
  const auto gradient = [&]<int L, int O>() -> auto& {
    return part<detail::ix(O)>(std::get<detail::ix(L - first_layer<S>)>(g));
  };
  walk::template backward<S>(
      [&](auto from) {  // (Every name below depends on B, so that clang instantiates nothing of a discarded branch.)
        constexpr int B = decltype(from)::value;
        const auto take = [&](const auto& m) {
          walk::template each_term<B, S>([&](auto t, auto l) {
            constexpr part_link to = decltype(l)::value;
            accumulate<to.starts>(gradient.template operator()<to.layer, to.output>(),
                                  bundle_part<detail::ix(decltype(t)::value)>(m));
          });
        };
        if constexpr (B == S + 1 && local_next<S>) {
          take(value_of(std::get<detail::ix(B - 1)>(local_backward_)[detail::ix(a.local_in)]));
        } else if constexpr (B == S + 1) {
          take(value_of(self().template remote_gradient<B - 1>(a)));
          self().template gradient_consumed<B - 1>(a);
        } else if constexpr (skip_local<skip_index(S, B)>) {
          take(value_of(
              std::get<skip_index(S, B)>(local_skip_gradient_)[detail::ix(skip_gradient_at<skip_index(S, B)>(a))]));
        } else {
          constexpr std::size_t K = skip_index(S, B);
          take(value_of(self().template remote_skip_gradient<K>(skip_gradient_at<K>(a))));
          self().template skip_gradient_consumed<K>(skip_gradient_at<K>(a));
        }
      },
      [&](auto last) {
        constexpr int T = decltype(last)::value;
        constexpr auto top = detail::ix(end_layer<T> - first_layer<T> - 1);
        take_loss<T, op>(a, std::get<top>(act.ys), std::get<top>(g));
      },
      [&](auto layer) {
        constexpr std::size_t K = detail::ix(decltype(layer)::value - first_layer<S>);
        auto& l = self().template weights<S>(a).template layer<detail::ix(decltype(layer)::value)>();
        constexpr bool split = Input && splittable_layer<std::remove_cvref_t<decltype(l)>>;
        detail::call_backward<split>(l, context_for<S, op, detail::ix(decltype(layer)::value)>(a), std::get<K>(act.xs),
                                     std::get<K>(act.ys), std::get<K>(saved), std::get<K>(g), std::get<K>(st.dxs));
      },
      [&](auto layer, auto p, auto l) {  // layer L's input part's gradient, into its source's
        constexpr part_link to = decltype(l)::value;
        const auto& d =
            part<detail::ix(decltype(p)::value)>(std::get<detail::ix(decltype(layer)::value - first_layer<S>)>(st.dxs));
        if constexpr (to.stage >= 0)
          accumulate<to.starts>(bundle_part<detail::ix(to.term)>(std::get<detail::ix(to.stage)>(st.outbox)), d);
        else
          accumulate<to.starts>(gradient.template operator()<to.layer, to.output>(), d);
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
