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
  if constexpr (!forward_only)
    if (update_) update_->write_scalars(origin_);  // (the update's scalars go with the step's number)
  check(Backend::record(step_copied_, origin_), "cudaEventRecord", "writing the step's number");
  step_copy_pending_ = true;
  if constexpr (only >= 0 && shares) groups_.wait_for_start(*this);
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

}  // namespace ctpipe::cuda::detail
