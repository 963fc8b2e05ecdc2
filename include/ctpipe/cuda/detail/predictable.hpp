// What predict() asks of a model on a device executor (the CUDA, NCCL and MPI device executors'
// one rule and message): its output is one device tensor, which predict copies into each
// microbatch's view.
#pragma once

#include <ctpipe/cuda/launch.hpp>
#include <ctpipe/cuda/layer.hpp>  // device_tensor
#include <ctpipe/exec/detail/face.hpp>

namespace ctpipe::cuda::detail {

template <class Output>
constexpr void require_predictable() {
  constexpr bool one_tensor = device_tensor<Output>;  // (a bool: one message, no concept's notes)
  static_assert(one_tensor,
                "ctpipe: predict() needs the model's output_type to be one device tensor (it copies each "
                "microbatch's output into outputs[i]); a model that ends in several tensors (ctpipe::tensors) can be "
                "trained and evaluated, not predicted");
}

/// A device executor's face (ctpipe::detail::executor_face): predict() copies into views of device
/// memory, under the rule above; Launch: its launch modes (ctpipe::cuda::launch; none on the MPI
/// device path, which runs eagerly); ForwardLaunch: whether evaluate and predict take one too.
template <class Launch, bool ForwardLaunch = true>
struct device_face {
  using launch = Launch;
  static constexpr bool forward_launch = ForwardLaunch, extents = true, output_views = true;
  template <class Output>
  static constexpr void predict_rule() {
    require_predictable<Output>();
  }
};

}  // namespace ctpipe::cuda::detail
