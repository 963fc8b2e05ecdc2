// The zero-bubble schedules on loop placement (Qi et al., ICLR'24): the backward is split into I
// (input gradient, on the critical path) and W (weight gradient), and the W fill the bubbles.
// ZB-H1, ZB-H2 and PyTorch's interleaved zero bubble (ZB1P). Each is a schedule_generator.
#pragma once

#include <ctpipe/schedule/classic.hpp>  // detail::grouped_slot
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

namespace detail {

// PyTorch's ZB1P for rank r: warm-up forwards, then steps of (F, I) — (I) once the forwards have
// run out — each followed by the W of the oldest I once the step index is at least r; then the
// remaining W. Forward k visits the grouped slot k with group g (Megatron's order); backwards and
// their W the same slots with the chunks reversed.
template <class Sink>
constexpr void emit_zero_bubble_1p(int p, int m, int v, int g, int warmup, int r, Sink& out) {
  const int total = m * v;
  int weights = 0;
  auto push = [&](op_kind k, int index, bool backward) {
    const auto x = grouped_slot(p, m, v, g, r, index, backward);
    out.push(r, make_compute(k, x.stage, x.microbatch));
  };
  for (int k = 0; k < warmup; ++k) push(op_kind::forward, k, false);
  for (int step = 0; step < total; ++step) {
    if (step < total - warmup) push(op_kind::forward, warmup + step, false);
    push(op_kind::backward_input, step, true);
    if (step >= r) push(op_kind::backward_weight, weights++, true);
  }
  while (weights < total) push(op_kind::backward_weight, weights++, true);
}

}  // namespace detail

/// ZB-H1 (one stage per rank): min(p-1-r, m) warm-up forwards, then (F, I) steps, each followed by
/// the W of the oldest I from step r on, then the remaining W. Bubble (p-1)(F+I-W), p activations
/// in flight like 1F1B. Equal to PyTorch's ZB1P with one chunk.
//   zb_h1(4, 8), rank 1:  1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4 1I2 1W1 ... 1F7 1I5 1W4 1I6 1W5 1I7 1W6 1W7
struct zb_h1_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::zb_h1")
  constexpr schedule_info info() const { return {"zb_h1", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r)
      detail::emit_zero_bubble_1p(ranks, microbatches, 1, microbatches, detail::min_int(ranks - 1 - r, microbatches), r,
                                  out);
  }
  friend constexpr bool operator==(const zb_h1_schedule&, const zb_h1_schedule&) = default;
};

/// ZB-H2 (one stage per rank): min(2p-1-2r, m) warm-up forwards; 2r pairs (I, F) with no W (while
/// forwards remain); triples (I, W, F) while forwards remain; (I, W) pairs; the remaining W, the
/// oldest first. Zero bubble at F = I = W with m >= 2p-1; peak 2p-1 activations.
//   zb_h2(4, 8), rank 1:  1F0 1F1 1F2 1F3 1F4 1I0 1F5 1I1 1F6 1I2 1W0 1F7 1I3 1W1 ... 1I7 1W5 1W6 1W7
struct zb_h2_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::zb_h2")
  constexpr schedule_info info() const { return {"zb_h2", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int m = microbatches;
    for (int r = 0; r < ranks; ++r) {
      detail::stage_cursor c{r};
      for (int k = detail::min_int(2 * ranks - 1 - 2 * r, m); k > 0; --k) c.forward(out, r, m);
      for (int k = 0; k < 2 * r && c.forwards < m; ++k) {
        c.input(out, r, m);
        c.forward(out, r, m);
      }
      while (c.forwards < m) {
        c.input(out, r, m);
        c.weight(out, r, m);
        c.forward(out, r, m);
      }
      while (c.backwards < m) {
        c.input(out, r, m);
        c.weight(out, r, m);
      }
      while (c.weights < m) c.weight(out, r, m);
    }
  }
  friend constexpr bool operator==(const zb_h2_schedule&, const zb_h2_schedule&) = default;
};

/// PyTorch's interleaved zero bubble (ScheduleInterleavedZeroBubble, "ZB1P"): `chunks` stages per
/// rank on loop placement; rounds R = max(1, m / p), M = m / R microbatches a round (m must be a
/// multiple of R, as in PyTorch); min((v-1)M + p-1-r, m v) warm-up forwards, Megatron's grouped
/// order with groups of M; steps (F, I) then (I), each followed by the W of the oldest I from step
/// r on; then the remaining W. With one chunk it is ZB-H1.
//   interleaved_zero_bubble(2, 4, 2), rank 0:  0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 ...
struct interleaved_zero_bubble_schedule {
  int ranks = 1, microbatches = 1, chunks = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::interleaved_zero_bubble")
  constexpr int rounds() const { return detail::max_int(1, microbatches / ranks); }
  constexpr int per_round() const { return microbatches / rounds(); }
  constexpr schedule_info info() const {
    return {"interleaved_zero_bubble", ranks, microbatches, chunks, ranks > 0 ? per_round() : 0};
  }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  constexpr param_check validate() const {
    if (microbatches % rounds() != 0) return {param_rule::microbatches_multiple_of_rounds, microbatches};
    return {};
  }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int g = per_round();
    for (int r = 0; r < ranks; ++r)
      detail::emit_zero_bubble_1p(ranks, microbatches, chunks, g,
                                  detail::min_int((chunks - 1) * g + ranks - 1 - r, microbatches * chunks), r, out);
  }
  friend constexpr bool operator==(const interleaved_zero_bubble_schedule&,
                                   const interleaved_zero_bubble_schedule&) = default;
};

constexpr zb_h1_schedule zb_h1(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr zb_h2_schedule zb_h2(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr interleaved_zero_bubble_schedule interleaved_zero_bubble(int ranks, int microbatches, int chunks) {
  return {ranks, microbatches, chunks};
}

}  // namespace ctpipe
