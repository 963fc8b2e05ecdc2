// Device tensors: views of device memory whose shape is a compile-time constant. Plain structs,
// usable from nvcc-compiled kernels and launchers (no Hana, no ctpipe schedule code here).
#pragma once

#include <cstddef>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE

namespace ctpipe::cuda {

/// A view of `(Extents * ...)` elements of T in device memory, row-major. The executor allocates
/// `bytes` for each buffer once and passes views; a view never owns memory.
template <class T, std::size_t... Extents>
struct tensor {
  static_assert(sizeof...(Extents) > 0, "ctpipe::cuda::tensor: give at least one extent");
  static_assert(((Extents > 0) && ...), "ctpipe::cuda::tensor: every extent must be at least 1");
  using value_type = T;
  static constexpr std::size_t rank = sizeof...(Extents);
  static constexpr std::size_t size = (std::size_t{1} * ... * Extents);
  static constexpr std::size_t bytes = size * sizeof(T);
  static constexpr std::size_t extents[rank] = {Extents...};

  T* data = nullptr;

  CTPIPE_HOST_DEVICE static constexpr std::size_t extent(std::size_t i) { return extents[i]; }
  constexpr bool operator==(const tensor&) const = default;
};

/// A tensor of up to MaxTokens tokens of `Row...` elements each, token-major (ctpipe/model/extent.hpp):
/// a microbatch of e tokens uses its first e rows, and the executors move only those where they
/// can. A layer learns e from its context (`*ctx.extent`, read in a kernel).
template <class T, std::size_t MaxTokens, std::size_t... Row>
struct token_tensor : tensor<T, MaxTokens, Row...> {
  static constexpr std::size_t max_tokens = MaxTokens;
};

}  // namespace ctpipe::cuda
