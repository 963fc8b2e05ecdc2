// DualPipe (DeepSeek-V3): two pipelines over mirrored copies of the model, fed from both ends.
// Rank r holds stage r of the first pipeline and stage p-1-r of the second (a copy of the same
// layers as the first's stage p-1-r: two parameter copies per rank, whose gradients a runtime sums
// across the two ranks that hold them). In the table the second pipeline's stages are numbered
// p .. 2p-1 (stage p + j copies stage j, on rank p-1-j) and it carries microbatches m/2 .. m-1
// (schedule_info::directions = 2; see stage_chains).
#pragma once

#include <ctpipe/schedule/detail/dualpipe_phases.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/schedule.hpp>

namespace ctpipe {

/// DualPipe: p even, m even, m >= 2p. Each rank runs the phases of DualPipeV with p/2 ranks and m/2
/// microbatches per direction, as the h-th rank, h = min(r, p-1-r): its chunk 0 is the direction in
/// which it sits at stage h (the first pipeline on ranks below p/2, the second above), its chunk 1
/// the other. F&B pairs overlap a forward of one direction with a backward of the other.
//   dualpipe(2, 4), rank 0 (stage 0 of one direction, 3 of the other):  0F0 3F2 0F1 3B2 [3F3 0B0] 3B3 0I1 0W1
struct dualpipe_schedule {
  int ranks = 2, microbatches = 4;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::dualpipe")
  constexpr schedule_info info() const { return {"dualpipe", ranks, microbatches, 2, 0, 2}; }
  /// Stage j < p of the first pipeline on rank j; stage p + j (the second's stage j) on rank p-1-j.
  constexpr int rank_of(int stage) const { return detail::v_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  constexpr param_check validate() const {
    if (ranks % 2 != 0) return {param_rule::ranks_even, ranks};
    if (microbatches % 2 != 0) return {param_rule::microbatches_even, microbatches};
    if (microbatches < 2 * ranks) return {param_rule::microbatches_at_least_two_ranks, microbatches};
    return {};
  }

  template <class Sink>
  constexpr void emit(Sink& out) const {
    const int p = ranks, half = microbatches / 2;
    for (int r = 0; r < p; ++r) {
      const detail::stage_cursor first{r, 0}, second{2 * p - 1 - r, half};  // the two directions
      if (r < p / 2)
        detail::dualpipe_phases(out, r, r, p / 2, half, first, second);
      else
        detail::dualpipe_phases(out, r, p - 1 - r, p / 2, half, second, first);
    }
  }
  friend constexpr bool operator==(const dualpipe_schedule&, const dualpipe_schedule&) = default;
};

constexpr dualpipe_schedule dualpipe(int ranks, int microbatches) { return {ranks, microbatches}; }

}  // namespace ctpipe
