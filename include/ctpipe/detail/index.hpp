// ix(i): an index or a count (int, mostly: ranks, stages, microbatches, positions are ints in the
// task IR) as the std::size_t that std::array, spans and buffers take. One spelling for the
// conversion everywhere; a floating-point argument does not compile.
#pragma once

#include <cstddef>
#include <type_traits>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE

namespace ctpipe::detail {

template <class T>
requires(std::is_integral_v<T> || std::is_enum_v<T>) CTPIPE_HOST_DEVICE constexpr std::size_t ix(T i) noexcept {
  return static_cast<std::size_t>(i);
}

}  // namespace ctpipe::detail
