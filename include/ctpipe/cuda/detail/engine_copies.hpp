// The CUDA engine's side of ctpipe::optimizer and of the device optimizer, and its tasks' issue
// (cuda/detail/engine.hpp declares them): each layer's values copied to host copies between steps
// and its parameters copied back, on the rank's stream; a device optimizer attached; a task
// issued (its range, device, errors) and the op switch's primitives (exec/detail/op_switch.hpp): a
// compute op (an overlapped pair F&B forked onto the rank's second stream and joined back), a
// send, a receive.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::copy_layer(std::size_t k, void* to,
                                                                                const void* from, std::size_t bytes,
                                                                                bool to_host) const {
  check_between_steps();
  const int r = only >= 0 ? only : groups_type::rank_of_layer(static_cast<int>(k));
  const auto s = streams_[ctpipe::detail::ix(r)];
  if constexpr (layout_.multi_device && only < 0)
    check(Backend::set_device(layout_.device[ctpipe::detail::ix(r)]), "cudaSetDevice",
          "copying a layer for the optimizer");
  check(to_host ? Backend::copy_to_host_async(to, from, bytes, s) : Backend::copy_to_device_async(to, from, bytes, s),
        "cudaMemcpyAsync",
        to_host ? "copying a layer's values to the host (ctpipe::optimizer)"
                : "copying a layer's parameters back to the device (ctpipe::optimizer)");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::finish_copies() const {
  check_between_steps();
  for (std::size_t r = 0; r < streams_.size(); ++r)
    if (stream_made_[r])
      check(Backend::synchronize(streams_[r]), "cudaStreamSynchronize",
            "waiting for the optimizer's copies (ctpipe::optimizer)");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::set_update(update_hook<Backend>* u) {
  check_between_steps();
  update_ = u;
  invalidate_graph();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::remove_update() noexcept {
  if (in_flight_) synchronize_all();  // (the step's update uses the update's memory)
  update_ = nullptr;
  invalidate_graph();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::check_between_steps() const {
  if (in_flight_)
    throw std::logic_error(std::string(Transport::tag::name) +
                           ": a step is in flight: wait() for it before the optimizer, a checkpoint or a forward-only "
                           "pass (evaluate, predict) uses the layers");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::run_compute(const A& a) {
  const auto s = streams_[ctpipe::detail::ix(R)];
  if constexpr (layout_.pairs && Op == op_kind::forward)
    if (a.pair == 1) fork_pair<R, Op, S>(a, s);
  if constexpr (layout_.pairs && Op == op_kind::backward)
    if (a.pair == 2) {  // the B of a pair: on the rank's second stream, then joined
      compute_on<R, Op, S>(a, aux_[ctpipe::detail::ix(R)]);
      join_pair<R, Op, S>(a, s);
      return;
    }
  compute_on<R, Op, S>(a, s);
}
template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::compute_on(const A& a, stream_type on) {
  if constexpr (Op == op_kind::forward && graph)
    parts::graph::template forward<R, S>(*this, a, on);
  else if constexpr (Op == op_kind::forward)
    parts::chain::template forward<R, S>(*this, a, on);
  else if constexpr (Op == op_kind::backward_weight && graph)
    parts::graph::template weight<R, S>(*this, a, on);
  else if constexpr (Op == op_kind::backward_weight)
    parts::chain::template weight<R, S>(*this, a, on);
  else if constexpr (graph)
    parts::graph::template backward<R, S, Op == op_kind::backward_input>(*this, a, on);
  else
    parts::chain::template backward<R, S, Op == op_kind::backward_input>(*this, a, on);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, ctpipe::detail::route M, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::send(const A& a) {
  if constexpr (graph)
    parts::graph::template send<R, M>(*this, a, streams_[ctpipe::detail::ix(R)]);
  else if constexpr (M.backward)
    parts::chain::template send_backward<R, M.here>(*this, a, streams_[ctpipe::detail::ix(R)]);
  else
    parts::chain::template send_forward<R, M.here>(*this, a, streams_[ctpipe::detail::ix(R)]);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, ctpipe::detail::route M, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::receive(const A& a) {
  constexpr auto x = facts_of<M>;
  const auto s = streams_[ctpipe::detail::ix(R)];
  if constexpr (only >= 0)
    transport_->template receive<x.edge, M.backward>(a.message, s);
  else
    check_task<R, op_of(M), M.here>(Backend::wait(s, event(x.sent + a.message)), "cudaStreamWaitEvent", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, int Other, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::issue_checked(const A& a, const char* label,
                                                                                   bool switch_device) {
  if constexpr (only >= 0 && is_compute(Op))
    if (hollow_) [[unlikely]] {
      hollow_task<R, Op, S>(a);
      return;
    }
  Backend::range_push(label);
  const range_end pop;
  try {
    if constexpr (layout_.multi_device)
      if (switch_device) check_task<R, Op, S>(Backend::set_device(on(device_of_rank<R>)), "cudaSetDevice", a);
    ctpipe::detail::run_op<R, Op, S, Other>(*this, a);
    const auto s = streams_[ctpipe::detail::ix(R)];
    if (sync_each_ && !capturing_) [[unlikely]] {
      check_task<R, Op, S>(Backend::synchronize(s), "cudaStreamSynchronize (sync_after_each_task)", a);
      if constexpr (layout_.pairs)
        check_task<R, Op, S>(Backend::synchronize(aux_[ctpipe::detail::ix(R)]),
                             "cudaStreamSynchronize (sync_after_each_task)", a);
    }
  } catch (...) {
    if constexpr (only >= 0) {
      // A wait of the transport timed out (the MPI device path's, on the host): the processes can
      // no longer agree on anything, so the step ends here, with that error; going on hollow would
      // wait out the timeout again at every later message (and blame this process's task).
      if (transport_->broken()) throw;
      fail_task<R, Op, S>(a);
    } else {
      rethrow_as_task_failure(R, task{Op, S, a.microbatch, -1});
    }
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::fork_pair(const A& a, stream_type s) {
  const auto e = event(layout_.pair_fork_event + R);
  check_task<R, Op, S>(Backend::record(e, s), "cudaEventRecord", a);
  check_task<R, Op, S>(Backend::wait(aux_[ctpipe::detail::ix(R)], e), "cudaStreamWaitEvent", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::join_pair(const A& a, stream_type s) {
  const auto e = event(layout_.pair_join_event + R);
  check_task<R, Op, S>(Backend::record(e, aux_[ctpipe::detail::ix(R)]), "cudaEventRecord", a);
  check_task<R, Op, S>(Backend::wait(s, e), "cudaStreamWaitEvent", a);
}

}  // namespace ctpipe::cuda::detail
