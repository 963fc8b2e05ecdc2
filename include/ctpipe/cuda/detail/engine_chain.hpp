// A chain's tasks in the CUDA engine (cuda/detail/engine_parts.hpp): F, B, I and W on the rank's
// stream (a paired F&B's B on its second stream), and each send of a boundary tensor: a pointer, a
// same-stream slot or a peer copy with events, or the process-mode transport's FIFO.
//
// Split backward: an I runs each layer's backward_input (its whole backward where the layer does
// not split) and keeps the gradients it computed, the incoming one included, in the stage's grad
// stash (one set per stash slot, device memory) until its W, which runs each splitting layer's
// backward_weight from the stash.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine_parts.hpp>
#include <ctpipe/cuda/detail/graph_layout.hpp>  // round_up
#include <ctpipe/cuda/layer.hpp>                // call_device
#include <ctpipe/cuda/plan.hpp>                 // handoff
#include <ctpipe/detail/index.hpp>              // ix

namespace ctpipe::cuda::detail {

template <class E, model_type Model, auto Stages, class Backend>
class stage_parts<E, Model, Stages, Backend>::chain {
 public:
  // The op switch's compute ops and sends for a chain's stage S, on stream s. B (Input false) or
  // I (Input true): an I keeps its incoming gradient and the ones it computes in the stage's grad
  // stash for the W; the stage's input gradient goes where a B's goes. W: every layer of the stage
  // that splits its backward adds its weight gradients (a stage none of whose layers splits has
  // nothing to do).
  template <int R, int S, class A>
  static void forward(E& en, const A& a, stream_type s);
  template <int R, int S, bool Input, class A>
  static void backward(E& en, const A& a, stream_type s);
  template <int R, int S, class A>
  static void weight(E& en, const A& a, stream_type s);
  template <int R, int S, class A>
  static void send_forward(E& en, const A& a, stream_type s);
  template <int R, int S, class A>
  static void send_backward(E& en, const A& a, stream_type s);

  // Boundary B: the forward ring on stage B + 1's device, the backward ring and same-rank
  // backward slots on stage B's.
  template <int B>
  static constexpr std::size_t boundary_stride = round_up(boundary_tensor<B>::bytes);
  template <int B>
  static boundary_tensor<B> ring_forward_view(const E& en, int message) {
    return E::template view<boundary_tensor<B>>(en.template base<B + 1>() +
                                                mem.ring_forward_base[ctpipe::detail::ix(B)] +
                                                ctpipe::detail::ix(message % capacity<B>) * boundary_stride<B>);
  }
  template <int B>
  static boundary_tensor<B> ring_backward_view(const E& en, int message) {
    return E::template view<boundary_tensor<B>>(en.template base<B>() + mem.ring_backward_base[ctpipe::detail::ix(B)] +
                                                ctpipe::detail::ix(message % capacity<B>) * boundary_stride<B>);
  }
  // Element K of stage S's gradients written by a B (the stage's set) or an I (kept for the W, in
  // stash slot `slot`'s set).
  template <int S, int K, bool Input>
  static element_t<S, K> gradient_view(const E& en, int slot) {
    constexpr auto u = ctpipe::detail::ix(S);
    if constexpr (Input)
      return E::template view<element_t<S, K>>(en.template base<S>() + mem.grad_stash_base[u] +
                                               ctpipe::detail::ix(slot) * mem.grad_stash_stride[u] +
                                               mem.grads_at[u][ctpipe::detail::ix(K)]);
    else
      return E::template view<element_t<S, K>>(en.template base<S>() + mem.grads_base[u] +
                                               mem.grads_at[u][ctpipe::detail::ix(K)]);
  }

 private:
  template <int S, int K>
  static element_t<S, K> stash_view(const E& en, int slot) {
    constexpr auto u = ctpipe::detail::ix(S);
    return E::template view<element_t<S, K>>(en.template base<S>() + mem.stash_base[u] +
                                             ctpipe::detail::ix(slot) * mem.stash_stride[u] +
                                             mem.stash_at[u][ctpipe::detail::ix(K)]);
  }
  template <int S, int K>
  static element_t<S, K> grads_view(const E& en) {
    return gradient_view<S, K, false>(en, 0);
  }
  template <int S, int K>
  static element_t<S, K> grad_stash_view(const E& en, int slot) {
    return gradient_view<S, K, true>(en, slot);
  }
  template <int B>
  static boundary_tensor<B> local_backward_view(const E& en, int slot) {
    return E::template view<boundary_tensor<B>>(en.template base<B>() + mem.local_backward_base[ctpipe::detail::ix(B)] +
                                                ctpipe::detail::ix(slot) * boundary_stride<B>);
  }
  // Where stage S's F left its input, for its B, I and W.
  template <int S>
  static void*& input_pointer(E& en, int slot) {
    return en.inputs_of_[layout_.x_bases[ctpipe::detail::ix(S)] + ctpipe::detail::ix(slot)];
  }
  // Layer first + K of stage S's saved state for the microbatch in stash slot `slot` (a view into
  // the slot; nothing for a layer without one).
  template <int S, int K>
  static auto saved_view(const E& en, int slot);

  template <int S, int K>
  static void run_forward(E& en, const cuda::context& c, const element_t<S, K>& x, int slot);
  // Layer first + K of stage S: a full backward, or (Input) an I: backward_input where the layer
  // splits its backward, its whole backward where it does not.
  template <int S, int K, bool Input, class X, class Y, class Dy, class Dx>
  static void layer_backward(E& en, const cuda::context& c, const X& x, const Y& y, int slot, const Dy& dy, Dx& dx);
  template <int S, int K, bool Input, class Dy>
  static void run_backward(E& en, const cuda::context& c, const element_t<S, 0>& x0, int slot, const Dy& dy,
                           element_t<S, 0>& dx0);
  template <int S, int K>
  static void layer_weight(E& en, const cuda::context& c, const element_t<S, 0>& x0, int slot);
};

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int K>
inline auto stage_parts<E, Model, Stages, Backend>::chain::saved_view(const E& en, int slot) {
  using L = typename Model::template layer_type<ctpipe::detail::ix(first_layer<S> + K)>;
  if constexpr (has_saved_state<L>) {
    constexpr auto u = ctpipe::detail::ix(S);
    return E::template view<saved_t<L>>(en.template base<S>() + mem.stash_base[u] +
                                        ctpipe::detail::ix(slot) * mem.stash_stride[u] +
                                        mem.saved_at[u][ctpipe::detail::ix(K)]);
  } else {
    return no_saved_state{};
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int K>
inline void stage_parts<E, Model, Stages, Backend>::chain::run_forward(E& en, const cuda::context& c,
                                                                       const element_t<S, K>& x, int slot) {
  constexpr int layer = first_layer<S> + K;
  auto y = stash_view<S, K + 1>(en, slot);
  auto saved = saved_view<S, K>(en, slot);
  call_device<ctpipe::detail::forward_call>(en.template layers<S>().template layer<ctpipe::detail::ix(layer)>(),
                                            E::at_layer(c, layer), x, y, saved);
  if constexpr (K + 1 < layer_count<S>) run_forward<S, K + 1>(en, c, y, slot);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::chain::forward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::forward;
  const cuda::context c = en.template context_of<R, S, Op>(a, s);
  en.template before_slot_reuse<S>(s);
  element_t<S, 0> x{};
  if constexpr (chains_.first(S)) {
    x = en.inputs_[ctpipe::detail::ix(a.microbatch)];
  } else if constexpr (layout_.forward[ctpipe::detail::ix(S - 1)] == handoff::pointer) {
    x = stash_view<S - 1, layer_count<S - 1>>(en, a.peer_stash);
  } else if constexpr (layout_.forward[ctpipe::detail::ix(S - 1)] == handoff::stash_copy) {
    x = stash_view<S, 0>(en, a.stash);
    E::template check_task<R, Op, S>(
        Backend::memcpy_async(x.data, en.on(device_of<S>), stash_view<S - 1, layer_count<S - 1>>(en, a.peer_stash).data,
                              en.on(device_of<S>), en.template used<element_t<S, 0>>(a.microbatch), s),
        "cudaMemcpyAsync", a);
  } else {
    x = stash_view<S, 0>(en, a.stash);
    E::template check_task<R, Op, S>(
        Backend::memcpy_async(x.data, en.on(device_of<S>), ring_forward_view<S - 1>(en, a.message).data,
                              en.on(device_of<S>), en.template used<element_t<S, 0>>(a.microbatch), s),
        "cudaMemcpyAsync", a);
    if constexpr (only >= 0)
      en.template consumed<S - 1, 0>(a.message, s);
    else if (a.message < reused<S - 1>)
      E::template check_task<R, Op, S>(
          Backend::record(en.event(layout_.consumed_forward[ctpipe::detail::ix(S - 1)] + a.message), s),
          "cudaEventRecord", a);
  }
  input_pointer<S>(en, a.stash) = x.data;
  run_forward<S, 0>(en, c, x, a.stash);
  if constexpr (forward_only && chains_.last(S))
    en.template finish_forward<R, S>(a, c, stash_view<S, layer_count<S>>(en, a.stash),
                                     grads_view<S, layer_count<S>>(en), s);
  E::template check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' forward (cudaGetLastError)",
                                   a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int K, bool Input, class X, class Y, class Dy, class Dx>
inline void stage_parts<E, Model, Stages, Backend>::chain::layer_backward(E& en, const cuda::context& c, const X& x,
                                                                          const Y& y, int slot, const Dy& dy, Dx& dx) {
  constexpr int layer = first_layer<S> + K;
  auto& l = en.template layers<S>().template layer<ctpipe::detail::ix(layer)>();
  const auto saved = saved_view<S, K>(en, slot);
  if constexpr (Input && device_splittable_layer<std::remove_cvref_t<decltype(l)>>) {
    auto s = saved;  // (a view: backward_input may write through it what its W needs)
    call_device<ctpipe::detail::backward_input_call>(l, E::at_layer(c, layer), x, y, s, dy, dx);
  } else {
    call_device<ctpipe::detail::backward_call>(l, E::at_layer(c, layer), x, y, saved, dy, dx);
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int K, bool Input, class Dy>
inline void stage_parts<E, Model, Stages, Backend>::chain::run_backward(E& en, const cuda::context& c,
                                                                        const element_t<S, 0>& x0, int slot,
                                                                        const Dy& dy, element_t<S, 0>& dx0) {
  const auto out = stash_view<S, K + 1>(en, slot);
  if constexpr (K == 0) {
    layer_backward<S, 0, Input>(en, c, x0, out, slot, dy, dx0);
  } else {
    const auto in = stash_view<S, K>(en, slot);
    auto dx = gradient_view<S, K, Input>(en, slot);
    layer_backward<S, K, Input>(en, c, in, out, slot, dy, dx);
    run_backward<S, K - 1, Input>(en, c, x0, slot, dx, dx0);
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, bool Input, class A>
inline void stage_parts<E, Model, Stages, Backend>::chain::backward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = Input ? op_kind::backward_input : op_kind::backward;
  constexpr int n = layer_count<S>;
  const cuda::context c = en.template context_of<R, S, Op>(a, s);
  const auto x = E::template view<element_t<S, 0>>(input_pointer<S>(en, a.stash));
  // Where the gradient of the stage's input goes.
  element_t<S, 0> dx{};
  if constexpr (chains_.first(S)) {
    dx = grads_view<S, 0>(en);
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S - 1)] == handoff::local_slot) {
    dx = local_backward_view<S - 1>(en, a.local_out);
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S - 1)] == handoff::ring_direct) {
    if (a.out_message >= capacity<S - 1>)
      E::template check_task<R, Op, S>(Backend::wait(s, en.event(layout_.consumed_backward[ctpipe::detail::ix(S - 1)] +
                                                                 a.out_message - capacity<S - 1>)),
                                       "cudaStreamWaitEvent", a);
    dx = ring_backward_view<S - 1>(en, a.out_message);
  } else {
    // Process mode: the transport may still be sending the gradient written here last time.
    if constexpr (only >= 0) en.transport_->template before_overwrite<S - 1, 1>(a.out_message, s);
    dx = grads_view<S, 0>(en);
  }
  // Where the gradient of its output comes from (an I keeps a copy for its W).
  const auto keep = [&](const element_t<S, n>& dy) {
    if constexpr (Input)
      E::template check_task<R, Op, S>(
          Backend::memcpy_async(grad_stash_view<S, n>(en, a.stash).data, en.on(device_of<S>), dy.data,
                                en.on(device_of<S>), en.template used<element_t<S, n>>(a.microbatch), s),
          "cudaMemcpyAsync", a);
  };
  if constexpr (chains_.last(S)) {
    const auto y = stash_view<S, n>(en, a.stash);
    auto dy = gradient_view<S, n, Input>(en, a.stash);
    en.loss_(E::at_layer(c, static_cast<int>(Model::size)), y, en.targets_[ctpipe::detail::ix(a.microbatch)], dy,
             reinterpret_cast<double*>(en.template base<S>() + mem.losses[chains_.chain_of_stage(S)]) + a.microbatch);
    run_backward<S, n - 1, Input>(en, c, x, a.stash, dy, dx);
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S)] == handoff::local_slot) {
    const auto dy = local_backward_view<S>(en, a.local_in);
    keep(dy);
    run_backward<S, n - 1, Input>(en, c, x, a.stash, dy, dx);
  } else {
    const auto dy = ring_backward_view<S>(en, a.message);
    keep(dy);
    run_backward<S, n - 1, Input>(en, c, x, a.stash, dy, dx);
    if constexpr (only >= 0)
      en.template consumed<S, 1>(a.message, s);
    else if (a.message < reused<S>)
      E::template check_task<R, Op, S>(
          Backend::record(en.event(layout_.consumed_backward[ctpipe::detail::ix(S)] + a.message), s), "cudaEventRecord",
          a);
  }
  E::template check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward (cudaGetLastError)",
                                   a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int K>
inline void stage_parts<E, Model, Stages, Backend>::chain::layer_weight(E& en, const cuda::context& c,
                                                                        const element_t<S, 0>& x0, int slot) {
  constexpr int layer = first_layer<S> + K;
  auto& l = en.template layers<S>().template layer<ctpipe::detail::ix(layer)>();
  if constexpr (device_splittable_layer<std::remove_cvref_t<decltype(l)>>) {
    const auto saved = saved_view<S, K>(en, slot);
    const auto y = stash_view<S, K + 1>(en, slot);
    const auto dy = grad_stash_view<S, K + 1>(en, slot);
    if constexpr (K == 0)
      call_device<ctpipe::detail::backward_weight_call>(l, E::at_layer(c, layer), x0, y, saved, dy);
    else
      call_device<ctpipe::detail::backward_weight_call>(l, E::at_layer(c, layer), stash_view<S, K>(en, slot), y, saved,
                                                        dy);
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::chain::weight(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::backward_weight;
  if constexpr (E::template any_splits<S>(std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{})) {
    const cuda::context c = en.template context_of<R, S, Op>(a, s);
    const auto x = E::template view<element_t<S, 0>>(input_pointer<S>(en, a.stash));
    [&]<std::size_t... K>(std::index_sequence<K...>) { (layer_weight<S, static_cast<int>(K)>(en, c, x, a.stash), ...); }
    (std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{});
    E::template check_task<R, Op, S>(Backend::last_error(),
                                     "a kernel launch of the layers' backward_weight (cudaGetLastError)", a);
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::chain::send_forward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::send_forward;
  constexpr auto b = ctpipe::detail::ix(S);
  if constexpr (only >= 0) {
    // From the stash, which keeps it until the stage's B: by then the receiver has it.
    en.transport_->template send<S, 0>(a.message, stash_view<S, layer_count<S>>(en, a.stash).data,
                                       en.template transport_bytes<S, 0>(a.message, boundary_tensor<S>::bytes), s);
    return;
  } else if constexpr (layout_.forward[b] == handoff::ring_copy) {
    if (a.message >= capacity<S>)
      E::template check_task<R, Op, S>(
          Backend::wait(s, en.event(layout_.consumed_forward[b] + a.message - capacity<S>)), "cudaStreamWaitEvent", a);
    E::template check_task<R, Op, S>(
        Backend::memcpy_async(ring_forward_view<S>(en, a.message).data, device_of<S + 1>,
                              stash_view<S, layer_count<S>>(en, a.stash).data, device_of<S>,
                              en.template used<boundary_tensor<S>>(a.microbatch), s),
        "cudaMemcpyPeerAsync", a);
  }
  E::template check_task<R, Op, S>(Backend::record(en.event(layout_.sent_forward[b] + a.message), s), "cudaEventRecord",
                                   a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::chain::send_backward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::send_backward;
  constexpr auto b = ctpipe::detail::ix(S - 1);
  if constexpr (only >= 0) {
    en.transport_->template send<S - 1, 1>(
        a.message, grads_view<S, 0>(en).data,
        en.template transport_bytes<S - 1, 1>(a.message, boundary_tensor<S - 1>::bytes), s);
    return;
  } else if constexpr (layout_.backward[b] == handoff::ring_copy) {
    if (a.message >= capacity<S - 1>)
      E::template check_task<R, Op, S>(
          Backend::wait(s, en.event(layout_.consumed_backward[b] + a.message - capacity<S - 1>)), "cudaStreamWaitEvent",
          a);
    E::template check_task<R, Op, S>(Backend::memcpy_async(ring_backward_view<S - 1>(en, a.message).data,
                                                           device_of<S - 1>, grads_view<S, 0>(en).data, device_of<S>,
                                                           en.template used<boundary_tensor<S - 1>>(a.microbatch), s),
                                     "cudaMemcpyPeerAsync", a);
  }
  E::template check_task<R, Op, S>(Backend::record(en.event(layout_.sent_backward[b] + a.message), s),
                                   "cudaEventRecord", a);
}

}  // namespace ctpipe::cuda::detail
