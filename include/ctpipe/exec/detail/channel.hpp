// The host executor's hand-off between two ranks: one direction of one stage boundary, a bounded
// single-producer single-consumer ring whose capacity the table's analysis proves enough.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include <ctpipe/detail/index.hpp>              // ix
#include <ctpipe/exec/detail/host_compute.hpp>  // cache_line

namespace ctpipe::detail {

// One direction of one stage boundary between two ranks: a ring of Capacity tensors. Message k
// lives in slot k % Capacity; `head` counts messages published, `tail` messages consumed. Both
// start at 0 every step.
template <class T, int Capacity>
struct channel {
  alignas(cache_line) std::atomic<std::uint32_t> head{0};
  alignas(cache_line) std::atomic<std::uint32_t> tail{0};
  alignas(cache_line) std::array<T, detail::ix(Capacity)> ring{};
  void reset() {
    head.store(0, std::memory_order_relaxed);
    tail.store(0, std::memory_order_relaxed);
  }
};
template <class T>
struct channel<T, 0> {
  void reset() {}
};

}  // namespace ctpipe::detail
