// V schedules for a memory budget (Qi et al., "Pipeline Parallelism with Controllable Memory",
// NeurIPS 2024): V placement (rank r holds stages r and 2p-1-r) with a building block whose
// lifespan sets the peak activation memory, squeezed and filled with W as the authors' scheduler
// does (detail/v_blocks.hpp). Peak activations per rank, in microbatches of a whole rank's layers
// (two stages): V-Min (p+4)/3, V-Half (p+2)/2 (integer division), against p for 1F1B; bubble about
// 2p/3m and p/2m at F = I = W. ZB-V (v_shape.hpp) is the family's zero-bubble member at 1F1B's memory.
#pragma once

#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/detail/v_blocks.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// V-Min: two stages per rank on V placement, any p and m; peak (p+4)/3 whole-rank activations
/// (2((p+4)/3) stage activations), about a third of 1F1B's, for a bubble about 2p/3m at F = I = W.
/// Block on rank r (slots of a 6-slot period; g = 2 where 3 divides p, else 0): F0 at r, F1 at
/// 2p-1-r, I1 at 2p+g+r, I0 at 4p+g-1-r.
//   v_min(4, 8), rank 0:  0F0 0F1 0F2 7F0 7I0 7W0 7F1 7I1 7W1 0I0 0W0 0F3 7F2 7I2 0I1 7W2 0W1 ...
struct v_min_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::v_min")
  constexpr schedule_info info() const { return {"v_min", ranks, microbatches, 2, 0}; }
  constexpr int program_length() const { return 6 * microbatches; }  // F, I, W of both stages
  constexpr int rank_of(int stage) const { return detail::v_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    detail::emit_v_blocks(detail::v_block::min, ranks, microbatches, out);
  }
  friend constexpr bool operator==(const v_min_schedule&, const v_min_schedule&) = default;
};

/// V-Half: two stages per rank on V placement, any p and m; peak (p+2)/2 whole-rank activations
/// (2((p+2)/2) stage activations), half of 1F1B's, for a bubble about p/2m at F = I = W.
/// Block on rank r (g = 3 where p is even, else 0): F0 at 2r, F1 at 3p-2-r, I1 at 3p+g+2r-1, I0 at
/// 6p+g-r-2.
//   v_half(4, 8), rank 0:  0F0 0F1 0F2 0F3 0F4 7F0 7I0 7W0 7F1 7I1 7W1 7F2 0I0 7I2 7W2 7F3 0W0 0F5 ...
struct v_half_schedule {
  int ranks = 1, microbatches = 1;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::v_half")
  constexpr schedule_info info() const { return {"v_half", ranks, microbatches, 2, 0}; }
  constexpr int program_length() const { return 6 * microbatches; }  // F, I, W of both stages
  constexpr int rank_of(int stage) const { return detail::v_rank_of(ranks, stage); }
  constexpr int stages() const { return info().stages(); }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    detail::emit_v_blocks(detail::v_block::half, ranks, microbatches, out);
  }
  friend constexpr bool operator==(const v_half_schedule&, const v_half_schedule&) = default;
};

constexpr v_min_schedule v_min(int ranks, int microbatches) { return {ranks, microbatches}; }
constexpr v_half_schedule v_half(int ranks, int microbatches) { return {ranks, microbatches}; }

}  // namespace ctpipe
