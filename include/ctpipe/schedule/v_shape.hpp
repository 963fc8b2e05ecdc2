// Schedules on V placement (rank r holds stages r and 2p-1-r, so the model goes down the ranks and
// back up; the turn, stages p-1 and p on the last rank, hands over locally): ZB-V (Qi et al.,
// PyTorch's ScheduleZBVZeroBubble) and DualPipeV (DeepSeek; PyTorch's ScheduleDualPipeV), which
// overlaps the forward of one microbatch with the full backward of another (F&B).
#pragma once

#include <cstddef>

#include <ctpipe/schedule/detail/dualpipe_phases.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// ZB-V: two stages per rank on V placement, any m. With n = max(2p-1, m), chunk 0 = stage r and
/// chunk 1 = stage 2p-1-r: (a) 2(p-r)-1 F0; (b) r x [F1, F0]; (c) p-r x [F1, I1, W1]; (d) while F1
/// lags F0 or F0 < n: [F0 if any left], I0, W0, F1, I1, W1; (e) r x [I0, I1]; (f) p-r x [I0, W0];
/// (g) the pending W1; (h) the pending W0; the ops of microbatches m..n-1 are left out. Zero bubble
/// at F = I = W, peak p stages' activations per rank.
//   zb_v(2, 4), rank 0 (stages 0 and 3):  0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 ...
struct zb_v_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::zb_v")
  constexpr schedule_info info() const { return {"zb_v", ranks, microbatches, 2, 0}; }
  constexpr int rank_of(int stage) const { return detail::v_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int p = ranks, m = microbatches, n = detail::max_int(2 * p - 1, m);
    for (int r = 0; r < p; ++r) {
      detail::stage_cursor c0{r}, c1{2 * p - 1 - r};
      for (int k = 0; k < 2 * (p - r) - 1; ++k) c0.forward(out, r, m);
      for (int k = 0; k < r; ++k) {
        c1.forward(out, r, m);
        c0.forward(out, r, m);
      }
      for (int k = 0; k < p - r; ++k) {
        c1.forward(out, r, m);
        c1.input(out, r, m);
        c1.weight(out, r, m);
      }
      while (c1.forwards < c0.forwards || c0.forwards < n) {
        if (c0.forwards < n) c0.forward(out, r, m);
        c0.input(out, r, m);
        c0.weight(out, r, m);
        c1.forward(out, r, m);
        c1.input(out, r, m);
        c1.weight(out, r, m);
      }
      for (int k = 0; k < r; ++k) {
        c0.input(out, r, m);
        c1.input(out, r, m);
      }
      for (int k = 0; k < p - r; ++k) {
        c0.input(out, r, m);
        c0.weight(out, r, m);
      }
      while (c1.weights < c1.backwards) c1.weight(out, r, m);
      while (c0.weights < c0.backwards) c0.weight(out, r, m);
    }
  }
  friend constexpr bool operator==(const zb_v_schedule&, const zb_v_schedule&) = default;
};

/// DualPipeV: two stages per rank on V placement, m >= 2p. Chunk 0 = stage r, chunk 1 = stage
/// 2p-1-r, in the phases of detail::dualpipe_phases with h = r: (1) 2(p-r-1) F0; (2) r+1 x [F0, F1]; (3) p-r-1 x [I1
/// (its W queued), W, F1]; (4) m-2p+r+1 x [F0&B1, F1&B0] (on the last rank the very first F0&B1 is F0 then B1); (5)
/// p-r-1 x [B1, F1&B0]; (6) r+1 x [B1, B0], from iteration (r+1)/2 on as I (W queued): before B1 for odd r, between B1
/// and B0 for even r; (7) p-r-1 x [W, I0]; (8) r+1 x W. W always takes the oldest queued one. Mixes full B with I and
/// W, and overlapped pairs F&B.
//   dualpipe_v(2, 4), rank 0 ([a b]: a pair F&B):  0F0 0F1 0F2 3F0 3I0 3W0 3F1 [0F3 3B1] [3F2 0B0] 3B2 ...
struct dualpipe_v_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::dualpipe_v")
  constexpr schedule_info info() const { return {"dualpipe_v", ranks, microbatches, 2, 0}; }
  constexpr int rank_of(int stage) const { return detail::v_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  constexpr param_check validate() const {
    if (microbatches < 2 * ranks) return {param_rule::microbatches_at_least_two_ranks, microbatches};
    return {};
  }

  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int p = ranks, m = microbatches;
    for (int r = 0; r < p; ++r) detail::dualpipe_phases(out, r, r, p, m, {r}, {2 * p - 1 - r});
  }
  friend constexpr bool operator==(const dualpipe_v_schedule&, const dualpipe_v_schedule&) = default;
};

constexpr zb_v_schedule zb_v(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr dualpipe_v_schedule dualpipe_v(int ranks, int microbatches) { return {ranks, microbatches}; }

}  // namespace ctpipe
