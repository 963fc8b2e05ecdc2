// each<N>(f): f(std::integral_constant<int, 0>{}), then 1, ..., N - 1: a loop whose index is a
// constant in its body (a stage, a layer, a tensor's part), for the CUDA engine's code.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace ctpipe::detail {

template <std::size_t... K, class F>
constexpr void each_of(std::index_sequence<K...>, F&& f) {
  (f(std::integral_constant<int, static_cast<int>(K)>{}), ...);
}
template <int N, class F>
constexpr void each(F&& f) {
  each_of(std::make_index_sequence<static_cast<std::size_t>(N)>{}, f);
}

}  // namespace ctpipe::detail
