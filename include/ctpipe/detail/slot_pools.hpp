// Buffer slots by liveness: the one allocator behind plan_memory's figures (a pool per rank and
// kind of buffer) and the executors' execution plan (a pool per stage or boundary, since each holds
// tensors of its own type). Plain constexpr.
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>

namespace ctpipe::detail {

/// `pools` pools of buffer slots, each handing a freed slot out again last-freed-first (so that a
/// pool's size, used(pool), is its peak number of live buffers); at most `most` slots of a pool are
/// free at once.
struct slot_pools {
  buffer<int> free_list, free_count, used_count;
  std::size_t per = 0;
  // The three buffers' elements (heap memory: a move keeps them). Reached without a call: in a
  // constant evaluation each call costs steps, and g++ time and memory, per take and give.
  int *list = nullptr, *count = nullptr, *used_ = nullptr;
  constexpr slot_pools(std::size_t pools, std::size_t most)
      : free_list(pools * (most + 1)),
        free_count(pools),
        used_count(pools),
        per(most + 1),
        list(free_list.data()),
        count(free_count.data()),
        used_(used_count.data()) {}
  /// A slot of `pool`: the one freed last, or a new one.
  constexpr int take(int pool) {
    return count[pool] > 0 ? list[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(--count[pool])]
                           : used_[pool]++;
  }
  constexpr void give(int pool, int slot) {
    list[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(count[pool]++)] = slot;
  }
  /// Every pool empty again, no slot handed out (the same sizes: a constant evaluation pays for
  /// each element of a new allocation).
  constexpr void reset() {
    free_count.fill(0);
    used_count.fill(0);
  }
  /// Slots `pool` has handed out at most at once.
  constexpr int used(int pool) const { return used_[pool]; }
};

}  // namespace ctpipe::detail
