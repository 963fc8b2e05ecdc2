// The generators: one code path for compile time and run time. Each writes the compute ops of
// every rank, in program order, into a sink (anything with push(rank, task)); the caller decides
// whether that is a fixed-size table (compile time) or a growing one (run time).
#pragma once

#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// Number of compute ops each rank runs: F and B for each of its chunks and each microbatch.
constexpr int compute_ops_per_rank(const schedule& s) { return 2 * s.chunks * s.microbatches; }

/// Plain placement: stage s lives on rank s mod p (chunk c of rank r is stage c*p + r).
constexpr int plain_rank_of(const schedule& s, int stage) { return stage % s.ranks; }

namespace detail {

constexpr int min_int(int a, int b) { return a < b ? a : b; }

// 1F1B for one rank: w = min(p-r-1, m) warm-up forwards, m-w steady (F, B) pairs, w backwards.
template <class Sink>
constexpr void emit_one_f_one_b(const schedule& s, int r, Sink& out) {
  const int m = s.microbatches;
  const int w = min_int(s.ranks - r - 1, m);
  for (int i = 0; i < w; ++i) out.push(r, make_compute(op_kind::forward, r, i));
  for (int i = 0; i < m - w; ++i) {
    out.push(r, make_compute(op_kind::forward, r, w + i));
    out.push(r, make_compute(op_kind::backward, r, i));
  }
  for (int i = m - w; i < m; ++i) out.push(r, make_compute(op_kind::backward, r, i));
}

// Megatron's interleaved order: the k-th forward (or backward) of a rank visits microbatches in
// groups of G, all chunks of one group before the next group; the last group holds the
// remainder. Backwards visit chunks in reverse. Returns the stage and microbatch of the k-th op.
struct stage_mb {
  int stage;
  int microbatch;
};
constexpr stage_mb interleaved_slot(const schedule& s, int r, int k, bool backward) {
  const int m = s.microbatches, v = s.chunks, g = s.effective_group();
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
  return {chunk * s.ranks + r, mb};
}

template <class Sink>
constexpr void emit_interleaved(const schedule& s, int r, Sink& out) {
  const int p = s.ranks, v = s.chunks, total = s.microbatches * v;
  // Warm-up forwards: 2(p-r-1) + (v-1)G, capped by the number of forwards.
  const int w = min_int(2 * (p - r - 1) + (v - 1) * s.effective_group(), total);
  auto fwd = [&](int k) {
    const auto x = interleaved_slot(s, r, k, false);
    out.push(r, make_compute(op_kind::forward, x.stage, x.microbatch));
  };
  auto bwd = [&](int k) {
    const auto x = interleaved_slot(s, r, k, true);
    out.push(r, make_compute(op_kind::backward, x.stage, x.microbatch));
  };
  for (int k = 0; k < w; ++k) fwd(k);
  for (int i = 0; i < total - w; ++i) {
    fwd(w + i);
    bwd(i);
  }
  for (int k = total - w; k < total; ++k) bwd(k);
}

}  // namespace detail

/// Writes the compute ops of every rank of `s` into `out`, rank by rank, each in program order.
/// `s` must be valid (see validate); callers check once at their entry point.
template <class Sink>
constexpr void emit_compute(const schedule& s, Sink& out) {
  const int p = s.ranks, m = s.microbatches;
  for (int r = 0; r < p; ++r) {
    switch (s.kind) {
      case schedule_kind::naive:
        // One microbatch at a time through all stages: rank r waits for the whole round trip.
        for (int i = 0; i < m; ++i) {
          out.push(r, make_compute(op_kind::forward, r, i));
          out.push(r, make_compute(op_kind::backward, r, i));
        }
        break;
      case schedule_kind::gpipe:
        for (int i = 0; i < m; ++i) out.push(r, make_compute(op_kind::forward, r, i));
        for (int i = 0; i < m; ++i) out.push(r, make_compute(op_kind::backward, r, i));
        break;
      case schedule_kind::one_f_one_b:
        detail::emit_one_f_one_b(s, r, out);
        break;
      case schedule_kind::interleaved:
        // With one chunk Megatron's interleaved schedule is plain 1F1B (w = p-r-1, not 2(p-r-1)).
        if (s.chunks == 1)
          detail::emit_one_f_one_b(s, r, out);
        else
          detail::emit_interleaved(s, r, out);
        break;
      case schedule_kind::custom:
        break;
    }
  }
}

}  // namespace ctpipe
