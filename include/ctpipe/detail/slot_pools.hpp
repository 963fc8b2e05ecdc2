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
  constexpr slot_pools(std::size_t pools, std::size_t most)
      : free_list(pools * (most + 1)), free_count(pools), used_count(pools), per(most + 1) {}
  /// A slot of `pool`: the one freed last, or a new one.
  constexpr int take(int pool) {
    int& f = free_count.data()[pool];
    return f > 0 ? free_list.data()[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(--f)]
                 : used_count.data()[pool]++;
  }
  constexpr void give(int pool, int slot) {
    free_list.data()[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(free_count.data()[pool]++)] = slot;
  }
  /// Slots `pool` has handed out at most at once.
  constexpr int used(int pool) const { return used_count.data()[pool]; }
};

}  // namespace ctpipe::detail
