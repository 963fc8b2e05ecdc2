// The schedules with a full backward B on loop placement: naive model parallel, GPipe, 1F1B,
// Megatron's interleaved 1F1B, and looped BFS. Each is a schedule_generator (schedule.hpp).
#pragma once

#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

namespace detail {

// 1F1B for one rank: w = min(p-r-1, m) warm-up forwards, m-w steady (F, B) pairs, w backwards.
template <class Sink>
constexpr void emit_one_f_one_b(int p, int m, int r, Sink& out) {
  const int w = min_int(p - r - 1, m);
  for (int i = 0; i < w; ++i) out.push(r, make_compute(op_kind::forward, r, i));
  for (int i = 0; i < m - w; ++i) {
    out.push(r, make_compute(op_kind::forward, r, w + i));
    out.push(r, make_compute(op_kind::backward, r, i));
  }
  for (int i = m - w; i < m; ++i) out.push(r, make_compute(op_kind::backward, r, i));
}

// Megatron's grouped order: the k-th forward (or backward) of a rank visits microbatches in groups
// of g, all v chunks of one group before the next group; the last group holds the remainder.
// Backwards visit the chunks in reverse. The stage and microbatch of the k-th op of rank r.
struct stage_mb {
  int stage;
  int microbatch;
};
constexpr stage_mb grouped_slot(int p, int m, int v, int g, int r, int k, bool backward) {
  const int full_groups = m / g;
  const int in_full = full_groups * g * v;
  int chunk = 0, mb = 0;
  if (k < in_full) {
    const int group = k / (g * v), within = k % (g * v);
    chunk = within / g;
    mb = group * g + within % g;
  } else {
    const int rem = m - full_groups * g, within = k - in_full;
    chunk = within / rem;
    mb = full_groups * g + within % rem;
  }
  if (backward) chunk = v - 1 - chunk;
  return {chunk * p + r, mb};
}

}  // namespace detail

/// Naive model parallel: one microbatch at a time through all stages, forward then backward.
//   naive(2, 2), rank 0 (stage, op, microbatch):  0F0 0B0 0F1 0B1
struct naive_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::naive")
  constexpr schedule_info info() const { return {"naive", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r)
      for (int i = 0; i < microbatches; ++i) {
        out.push(r, make_compute(op_kind::forward, r, i));
        out.push(r, make_compute(op_kind::backward, r, i));
      }
  }
  friend constexpr bool operator==(const naive_schedule&, const naive_schedule&) = default;
};

/// GPipe (fill-drain): every rank runs all forwards, then all backwards in microbatch order
/// (as PyTorch's ScheduleGPipe).
//   gpipe(4, 8), rank 1:  1F0 1F1 ... 1F7 1B0 1B1 ... 1B7
struct gpipe_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::gpipe")
  constexpr schedule_info info() const { return {"gpipe", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < microbatches; ++i) out.push(r, make_compute(op_kind::forward, r, i));
      for (int i = 0; i < microbatches; ++i) out.push(r, make_compute(op_kind::backward, r, i));
    }
  }
  friend constexpr bool operator==(const gpipe_schedule&, const gpipe_schedule&) = default;
};

/// 1F1B (PipeDream-Flush, Megatron's default).
//   one_f_one_b(4, 8), rank 1:  1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7
struct one_f_one_b_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::one_f_one_b")
  constexpr schedule_info info() const { return {"1f1b", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r) detail::emit_one_f_one_b(ranks, microbatches, r, out);
  }
  friend constexpr bool operator==(const one_f_one_b_schedule&, const one_f_one_b_schedule&) = default;
};

/// Megatron's interleaved 1F1B (virtual pipeline) with `chunks` stages per rank on loop placement
/// and microbatch groups of `group` (0 = default: ranks, or microbatches when there are fewer
/// microbatches than ranks).
//   interleaved(2, 4, 2), rank 0 (stages 0 and 2):  0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3
struct interleaved_schedule {
  int ranks = 1, microbatches = 1, chunks = 1, group = 0;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::interleaved")

  /// The group size the generator uses (resolves the default).
  constexpr int effective_group() const {
    if (group != 0) return group;
    return microbatches < ranks ? microbatches : ranks;
  }
  constexpr schedule_info info() const { return {"interleaved", ranks, microbatches, chunks, effective_group()}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  constexpr param_check validate() const {
    if (group != 0) {
      if (microbatches < ranks) {
        if (group != microbatches) return {param_rule::group_equals_microbatches, group};
      } else {
        if (group < ranks) return {param_rule::group_at_least_ranks, group};
        if (group > microbatches) return {param_rule::group_at_most_microbatches, group};
      }
    }
    const int g = effective_group();
    const int rem = microbatches % g;
    if (rem != 0 && rem < ranks) return {param_rule::group_remainder, g};
    return {};
  }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int p = ranks, v = chunks, m = microbatches, total = m * v, g = effective_group();
    for (int r = 0; r < p; ++r) {
      // With one chunk Megatron's interleaved schedule is plain 1F1B (w = p-r-1, not 2(p-r-1)).
      if (v == 1) {
        detail::emit_one_f_one_b(p, m, r, out);
        continue;
      }
      // Warm-up forwards: 2(p-r-1) + (v-1)G, capped by the number of forwards.
      const int w = detail::min_int(2 * (p - r - 1) + (v - 1) * g, total);
      auto fwd = [&](int k) {
        const auto x = detail::grouped_slot(p, m, v, g, r, k, false);
        out.push(r, make_compute(op_kind::forward, x.stage, x.microbatch));
      };
      auto bwd = [&](int k) {
        const auto x = detail::grouped_slot(p, m, v, g, r, k, true);
        out.push(r, make_compute(op_kind::backward, x.stage, x.microbatch));
      };
      for (int k = 0; k < w; ++k) fwd(k);
      for (int i = 0; i < total - w; ++i) {
        fwd(w + i);
        bwd(i);
      }
      for (int k = total - w; k < total; ++k) bwd(k);
    }
  }
  friend constexpr bool operator==(const interleaved_schedule&, const interleaved_schedule&) = default;
};

/// Looped BFS (breadth-first, PyTorch's ScheduleLoopedBFS): for each local chunk in increasing
/// order, the forwards of all microbatches; then for each chunk in decreasing order, its backwards
/// in decreasing microbatch order.
//   looped_bfs(2, 4, 2), rank 0:  0F0 0F1 0F2 0F3 2F0 2F1 2F2 2F3 2B3 2B2 2B1 2B0 0B3 0B2 0B1 0B0
struct looped_bfs_schedule {
  int ranks = 1, microbatches = 1, chunks = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::looped_bfs")
  constexpr schedule_info info() const { return {"looped_bfs", ranks, microbatches, chunks, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r) {
      for (int c = 0; c < chunks; ++c)
        for (int i = 0; i < microbatches; ++i) out.push(r, make_compute(op_kind::forward, c * ranks + r, i));
      for (int c = chunks - 1; c >= 0; --c)
        for (int i = microbatches - 1; i >= 0; --i) out.push(r, make_compute(op_kind::backward, c * ranks + r, i));
    }
  }
  friend constexpr bool operator==(const looped_bfs_schedule&, const looped_bfs_schedule&) = default;
};

constexpr naive_schedule naive(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr gpipe_schedule gpipe(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr one_f_one_b_schedule one_f_one_b(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr interleaved_schedule interleaved(int ranks, int microbatches, int chunks, int group = 0) {
  return {ranks, microbatches, chunks, group};
}
constexpr looped_bfs_schedule looped_bfs(int ranks, int microbatches, int chunks) {
  return {ranks, microbatches, chunks};
}

}  // namespace ctpipe
