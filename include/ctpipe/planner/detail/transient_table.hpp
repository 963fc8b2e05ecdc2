// A table with run-time sizes that also works inside one constant evaluation: its storage is
// detail::buffer, not std::vector (see buffer.hpp), so it must be built and dropped within the
// evaluation that uses it, which is what the planner does with each candidate schedule.
#pragma once

#include <cstddef>
#include <span>

#include <ctpipe/analysis/analyse.hpp>  // transient_extent
#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe::detail {

struct transient_table {
  static constexpr std::size_t static_ranks = transient_extent;  // its figures in buffers too

  schedule_info params{};
  buffer<int> stage_rank;
  buffer<task> tasks;  // rank r's program: tasks[offset[r] .. offset[r] + length[r])
  buffer<int> offset;  // ranks + 1 entries
  buffer<int> length;

  constexpr int ranks() const { return params.ranks; }
  constexpr int stages() const { return static_cast<int>(stage_rank.size()); }
  constexpr int microbatches() const { return params.microbatches; }
  constexpr int rank_of(int stage) const { return stage_rank.data()[stage]; }
  constexpr std::span<const task> program(int rank) const {
    return {tasks.data() + offset.data()[rank], static_cast<std::size_t>(length.data()[rank])};
  }
  constexpr void push(int rank, task t) { tasks.data()[offset.data()[rank] + length.data()[rank]++] = t; }
};

// Counts the ops a writer pushes per rank.
struct transient_counter {
  buffer<int> length;
  constexpr void push(int rank, task) { ++length.data()[rank]; }
};

// An empty table shaped for what `write(sink)` pushes: a counting pass, then room for exactly that.
template <class Write>
constexpr transient_table shaped_table(const schedule_info& info, buffer<int> placement, Write&& write) {
  const auto p = static_cast<std::size_t>(info.ranks);
  transient_counter count{buffer<int>(p)};
  write(count);
  transient_table t{info, static_cast<buffer<int>&&>(placement), {}, buffer<int>(p + 1), buffer<int>(p)};
  for (std::size_t r = 0; r < p; ++r) t.offset.data()[r + 1] = t.offset.data()[r] + count.length.data()[r];
  t.tasks = buffer<task>(static_cast<std::size_t>(t.offset.data()[p]));
  write(t);
  return t;
}

/// The lowered table of schedule `s` (compute ops, sends and receives), in constant evaluation or at
/// run time. `s` must follow its rules (validate(s).ok()).
template <schedule_generator S>
constexpr transient_table transient_lowered(const S& s) {
  const schedule_info info = s.info();
  auto placement = [&] {
    buffer<int> b(static_cast<std::size_t>(info.stages()));
    for (int st = 0; st < info.stages(); ++st) b.data()[st] = s.rank_of(st);
    return b;
  };
  const transient_table compute = shaped_table(info, placement(), [&](auto& sink) { s.emit(sink); });
  return shaped_table(info, placement(), [&](auto& sink) { lower(compute, sink); });
}

}  // namespace ctpipe::detail
