// What predict() asks of a model on a device executor (the CUDA, NCCL and MPI device executors'
// one rule and message): its output is one device tensor, which predict copies into each
// microbatch's view.
#pragma once

#include <ctpipe/cuda/layer.hpp>  // device_tensor

namespace ctpipe::cuda::detail {

template <class Output>
constexpr void require_predictable() {
  constexpr bool one_tensor = device_tensor<Output>;  // (a bool: one message, no concept's notes)
  static_assert(one_tensor,
                "ctpipe: predict() needs the model's output_type to be one device tensor (it copies each "
                "microbatch's output into outputs[i]); a model that ends in several tensors (ctpipe::tensors) can be "
                "trained and evaluated, not predicted");
}

}  // namespace ctpipe::cuda::detail
