// The CUDA engine's tasks of a chain's stage (cuda/detail/engine.hpp declares them): F, B, I and W
// on the rank's stream (a paired F&B's B on its second stream), and each send and receive of a
// boundary tensor: a pointer, a same-stream slot or a peer copy with events, or the process-mode
// transport's FIFO.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, op_kind Op, class A>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::context_of(const A& a, stream_type s) const
    -> cuda::context {
  return {Backend::handle(s),
          on(device_of<S>),
          R,
          S,
          first_microbatch_ + replica_offset_ + a.microbatch,
          Op,
          first_layer<S>,
          reinterpret_cast<const std::uint64_t*>(base<S>() + mem.step_at[ctpipe::detail::ix(device_of<S>)]),
          extent_word<S>(a.microbatch),
          host_extent(a.microbatch),
          !forward_only};
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline std::size_t engine<Model, Stages, Loss, Backend, Layout, Transport>::used_of(std::size_t whole,
                                                                                    std::size_t token_bytes,
                                                                                    int i) const noexcept {
  if constexpr (token_capacity == 0)
    return whole;
  else
    return capturing_ || token_bytes == 0 ? whole : token_bytes * ctpipe::detail::ix(extents_[ctpipe::detail::ix(i)]);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline int engine<Model, Stages, Loss, Backend, Layout, Transport>::host_extent(int i) const noexcept {
  if constexpr (token_capacity == 0)
    return 0;
  else
    return capturing_ ? 0 : extents_[ctpipe::detail::ix(i)];
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::extent_word(int i) const noexcept -> const int* {
  if constexpr (token_capacity == 0)
    return nullptr;
  else
    return reinterpret_cast<const int*>(base<S>() + mem.step_at[ctpipe::detail::ix(device_of<S>)] +
                                        sizeof(std::uint64_t)) +
           i;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int K>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::saved_view(int slot) const {
  using L = typename Model::template layer_type<ctpipe::detail::ix(first_layer<S> + K)>;
  if constexpr (has_saved_state<L>) {
    constexpr auto u = ctpipe::detail::ix(S);
    return view<saved_t<L>>(base<S>() + mem.stash_base[u] + ctpipe::detail::ix(slot) * mem.stash_stride[u] +
                            mem.saved_at[u][ctpipe::detail::ix(K)]);
  } else {
    return no_saved_state{};
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::write_step_number() {
  if (step_copy_pending_)
    check(Backend::event_synchronize(step_copied_), "cudaEventSynchronize", "writing the step's number");
  *step_host_ = next_step_++;
  constexpr std::size_t words = token_capacity > 0 ? step_words_bytes(microbatches) : sizeof(std::uint64_t);
  if constexpr (token_capacity > 0) std::memcpy(step_host_ + 1, extents_.data(), sizeof(int) * extents_.size());
  if constexpr (layout_.multi_device || only >= 0)
    check(Backend::set_device(on(layout_.device[0])), "cudaSetDevice", "writing the step's number");
  for (std::size_t d = 0; d < memory_.size(); ++d)
    if (memory_[d])
      check(Backend::copy_to_device_async(static_cast<char*>(memory_[d]) + mem.step_at[d], step_host_, words, origin_),
            "cudaMemcpyAsync", "writing the step's number");
  check(Backend::record(step_copied_, origin_), "cudaEventRecord", "writing the step's number");
  step_copy_pending_ = true;
  if constexpr (only >= 0 && shares) groups_.wait_for_start(*this);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int K>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::run_forward(const cuda::context& c,
                                                                                 const element_t<S, K>& x, int slot) {
  constexpr int layer = first_layer<S> + K;
  auto y = stash_view<S, K + 1>(slot);
  auto saved = saved_view<S, K>(slot);
  call_device<ctpipe::detail::forward_call>(layers<S>().template layer<ctpipe::detail::ix(layer)>(), at_layer(c, layer),
                                            x, y, saved);
  if constexpr (K + 1 < layer_count<S>) run_forward<S, K + 1>(c, y, slot);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::before_slot_reuse(stream_type s) {
  if constexpr (forward_only && only >= 0) {
    if constexpr (Transport::sends_read_late) {
      if constexpr (S + 1 < stage_count) transport_->template before_reuse<S, 0>(s);
      ctpipe::detail::each<stage_count - 1 - S>([&](auto b) {
        constexpr int B = S + 1 + decltype(b)::value;
        if constexpr (B > S + 1 && crossing_of(S, B) < crossing_count)
          transport_->template before_reuse<crossing_edge<crossing_of(S, B)>, 0>(s);
      });
    }
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::forward(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::forward;
  const cuda::context c = context_of<R, S, Op>(a, s);
  before_slot_reuse<S>(s);
  element_t<S, 0> x{};
  if constexpr (chains_.first(S)) {
    x = inputs_[ctpipe::detail::ix(a.microbatch)];
  } else if constexpr (layout_.forward[ctpipe::detail::ix(S - 1)] == handoff::pointer) {
    x = stash_view<S - 1, layer_count<S - 1>>(a.peer_stash);
  } else if constexpr (layout_.forward[ctpipe::detail::ix(S - 1)] == handoff::stash_copy) {
    x = stash_view<S, 0>(a.stash);
    check_task<R, Op, S>(
        Backend::memcpy_async(x.data, on(device_of<S>), stash_view<S - 1, layer_count<S - 1>>(a.peer_stash).data,
                              on(device_of<S>), used<element_t<S, 0>>(a.microbatch), s),
        "cudaMemcpyAsync", a);
  } else {
    x = stash_view<S, 0>(a.stash);
    check_task<R, Op, S>(Backend::memcpy_async(x.data, on(device_of<S>), ring_forward_view<S - 1>(a.message).data,
                                               on(device_of<S>), used<element_t<S, 0>>(a.microbatch), s),
                         "cudaMemcpyAsync", a);
    if constexpr (only >= 0)
      consumed<S - 1, 0>(a.message, s);
    else if (a.message < reused<S - 1>)
      check_task<R, Op, S>(Backend::record(event(layout_.consumed_forward[ctpipe::detail::ix(S - 1)] + a.message), s),
                           "cudaEventRecord", a);
  }
  input_pointer<S>(a.stash) = x.data;
  run_forward<S, 0>(c, x, a.stash);
  if constexpr (forward_only && chains_.last(S))
    finish_forward<R, S>(a, c, stash_view<S, layer_count<S>>(a.stash), grads_view<S, layer_count<S>>(), s);
  check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' forward (cudaGetLastError)", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A, class Y, class Dy>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::finish_forward(const A& a, const cuda::context& c,
                                                                                    const Y& y, Dy dy, stream_type s) {
  constexpr op_kind Op = op_kind::forward;
  if (!predicting_) {
    loss_(at_layer(c, static_cast<int>(Model::size)), y, targets_[ctpipe::detail::ix(a.microbatch)], dy,
          reinterpret_cast<double*>(base<S>() + mem.losses[chains_.chain_of_stage(S)]) + a.microbatch);
    return;
  }
  if constexpr (std::is_same_v<Y, output_type> && device_tensor<Y>) {
    const output_type& out = outputs_[ctpipe::detail::ix(a.microbatch)];
    const std::size_t n = used<output_type>(a.microbatch);
    if (n < output_type::bytes)
      check_task<R, Op, S>(Backend::memset_async(reinterpret_cast<char*>(out.data) + n, output_type::bytes - n, s),
                           "cudaMemsetAsync", a);
    check_task<R, Op, S>(Backend::memcpy_async(out.data, on(device_of<S>), y.data, on(device_of<S>), n, s),
                         "cudaMemcpyAsync", a);
    written_[ctpipe::detail::ix(a.microbatch)] = true;
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int K, bool Input, class X, class Y, class Dy, class Dx>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::layer_backward(const cuda::context& c, const X& x,
                                                                                    const Y& y, int slot, const Dy& dy,
                                                                                    Dx& dx) {
  constexpr int layer = first_layer<S> + K;
  auto& l = layers<S>().template layer<ctpipe::detail::ix(layer)>();
  const auto saved = saved_view<S, K>(slot);
  if constexpr (Input && device_splittable_layer<std::remove_cvref_t<decltype(l)>>) {
    auto s = saved;  // (a view: backward_input may write through it what its W needs)
    call_device<ctpipe::detail::backward_input_call>(l, at_layer(c, layer), x, y, s, dy, dx);
  } else {
    call_device<ctpipe::detail::backward_call>(l, at_layer(c, layer), x, y, saved, dy, dx);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int K, bool Input, class Dy>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::run_backward(const cuda::context& c,
                                                                                  const element_t<S, 0>& x0, int slot,
                                                                                  const Dy& dy, element_t<S, 0>& dx0) {
  const auto out = stash_view<S, K + 1>(slot);
  if constexpr (K == 0) {
    layer_backward<S, 0, Input>(c, x0, out, slot, dy, dx0);
  } else {
    const auto in = stash_view<S, K>(slot);
    auto dx = gradient_view<S, K, Input>(slot);
    layer_backward<S, K, Input>(c, in, out, slot, dy, dx);
    run_backward<S, K - 1, Input>(c, x0, slot, dx, dx0);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, bool Input, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::backward(const A& a, stream_type s) {
  constexpr op_kind Op = Input ? op_kind::backward_input : op_kind::backward;
  constexpr int n = layer_count<S>;
  const cuda::context c = context_of<R, S, Op>(a, s);
  const auto x = view<element_t<S, 0>>(input_pointer<S>(a.stash));
  // Where the gradient of the stage's input goes.
  element_t<S, 0> dx{};
  if constexpr (chains_.first(S)) {
    dx = grads_view<S, 0>();
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S - 1)] == handoff::local_slot) {
    dx = local_backward_view<S - 1>(a.local_out);
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S - 1)] == handoff::ring_direct) {
    if (a.out_message >= capacity<S - 1>)
      check_task<R, Op, S>(Backend::wait(s, event(layout_.consumed_backward[ctpipe::detail::ix(S - 1)] + a.out_message -
                                                  capacity<S - 1>)),
                           "cudaStreamWaitEvent", a);
    dx = ring_backward_view<S - 1>(a.out_message);
  } else {
    // Process mode: the transport may still be sending the gradient written here last time.
    if constexpr (only >= 0) transport_->template before_overwrite<S - 1, 1>(a.out_message, s);
    dx = grads_view<S, 0>();
  }
  // Where the gradient of its output comes from (an I keeps a copy for its W).
  const auto keep = [&](const element_t<S, n>& dy) {
    if constexpr (Input)
      check_task<R, Op, S>(Backend::memcpy_async(grad_stash_view<S, n>(a.stash).data, on(device_of<S>), dy.data,
                                                 on(device_of<S>), used<element_t<S, n>>(a.microbatch), s),
                           "cudaMemcpyAsync", a);
  };
  if constexpr (chains_.last(S)) {
    const auto y = stash_view<S, n>(a.stash);
    auto dy = gradient_view<S, n, Input>(a.stash);
    loss_(at_layer(c, static_cast<int>(Model::size)), y, targets_[ctpipe::detail::ix(a.microbatch)], dy,
          reinterpret_cast<double*>(base<S>() + mem.losses[chains_.chain_of_stage(S)]) + a.microbatch);
    run_backward<S, n - 1, Input>(c, x, a.stash, dy, dx);
  } else if constexpr (layout_.backward[ctpipe::detail::ix(S)] == handoff::local_slot) {
    const auto dy = local_backward_view<S>(a.local_in);
    keep(dy);
    run_backward<S, n - 1, Input>(c, x, a.stash, dy, dx);
  } else {
    const auto dy = ring_backward_view<S>(a.message);
    keep(dy);
    run_backward<S, n - 1, Input>(c, x, a.stash, dy, dx);
    if constexpr (only >= 0)
      consumed<S, 1>(a.message, s);
    else if (a.message < reused<S>)
      check_task<R, Op, S>(Backend::record(event(layout_.consumed_backward[ctpipe::detail::ix(S)] + a.message), s),
                           "cudaEventRecord", a);
  }
  check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward (cudaGetLastError)", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int K>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::layer_weight(const cuda::context& c,
                                                                                  const element_t<S, 0>& x0, int slot) {
  constexpr int layer = first_layer<S> + K;
  auto& l = layers<S>().template layer<ctpipe::detail::ix(layer)>();
  if constexpr (device_splittable_layer<std::remove_cvref_t<decltype(l)>>) {
    const auto saved = saved_view<S, K>(slot);
    const auto y = stash_view<S, K + 1>(slot);
    const auto dy = grad_stash_view<S, K + 1>(slot);
    if constexpr (K == 0)
      call_device<ctpipe::detail::backward_weight_call>(l, at_layer(c, layer), x0, y, saved, dy);
    else
      call_device<ctpipe::detail::backward_weight_call>(l, at_layer(c, layer), stash_view<S, K>(slot), y, saved, dy);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::weight(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::backward_weight;
  if constexpr (any_splits<S>(std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{})) {
    const cuda::context c = context_of<R, S, Op>(a, s);
    const auto x = view<element_t<S, 0>>(input_pointer<S>(a.stash));
    [&]<std::size_t... K>(std::index_sequence<K...>) { (layer_weight<S, static_cast<int>(K)>(c, x, a.stash), ...); }
    (std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{});
    check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward_weight (cudaGetLastError)", a);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::send_forward(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::send_forward;
  constexpr auto b = ctpipe::detail::ix(S);
  if constexpr (only >= 0) {
    // From the stash, which keeps it until the stage's B: by then the receiver has it.
    transport_->template send<S, 0>(a.message, stash_view<S, layer_count<S>>(a.stash).data,
                                    transport_bytes<S, 0>(a.message, boundary_tensor<S>::bytes), s);
    return;
  } else if constexpr (layout_.forward[b] == handoff::ring_copy) {
    if (a.message >= capacity<S>)
      check_task<R, Op, S>(Backend::wait(s, event(layout_.consumed_forward[b] + a.message - capacity<S>)),
                           "cudaStreamWaitEvent", a);
    check_task<R, Op, S>(Backend::memcpy_async(ring_forward_view<S>(a.message).data, device_of<S + 1>,
                                               stash_view<S, layer_count<S>>(a.stash).data, device_of<S>,
                                               used<boundary_tensor<S>>(a.microbatch), s),
                         "cudaMemcpyPeerAsync", a);
  }
  check_task<R, Op, S>(Backend::record(event(layout_.sent_forward[b] + a.message), s), "cudaEventRecord", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::send_backward(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::send_backward;
  constexpr auto b = ctpipe::detail::ix(S - 1);
  if constexpr (only >= 0) {
    transport_->template send<S - 1, 1>(a.message, grads_view<S, 0>().data,
                                        transport_bytes<S - 1, 1>(a.message, boundary_tensor<S - 1>::bytes), s);
    return;
  } else if constexpr (layout_.backward[b] == handoff::ring_copy) {
    if (a.message >= capacity<S - 1>)
      check_task<R, Op, S>(Backend::wait(s, event(layout_.consumed_backward[b] + a.message - capacity<S - 1>)),
                           "cudaStreamWaitEvent", a);
    check_task<R, Op, S>(
        Backend::memcpy_async(ring_backward_view<S - 1>(a.message).data, device_of<S - 1>, grads_view<S, 0>().data,
                              device_of<S>, used<boundary_tensor<S - 1>>(a.microbatch), s),
        "cudaMemcpyPeerAsync", a);
  }
  check_task<R, Op, S>(Backend::record(event(layout_.sent_backward[b] + a.message), s), "cudaEventRecord", a);
}

}  // namespace ctpipe::cuda::detail
