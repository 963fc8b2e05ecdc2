// Small pieces the built-in generators share: placements and per-(stage kind) microbatch counters.
#pragma once

#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

constexpr int min_int(int a, int b) { return a < b ? a : b; }
constexpr int max_int(int a, int b) { return a > b ? a : b; }

/// Loop placement: stage s lives on rank s mod p (chunk c of rank r is stage c*p + r).
constexpr int loop_rank_of(int ranks, int stage) { return stage % ranks; }
/// V placement: rank r holds stages r and 2p-1-r.
constexpr int v_rank_of(int ranks, int stage) { return stage < ranks ? stage : 2 * ranks - 1 - stage; }

/// One rank's ops of one stage, handed out in microbatch order: the next F, the next I (or B), and
/// the next W, which always takes the oldest I still without its W. Ops whose microbatch is not
/// below `limit` are counted but not written (ZB-V generates n >= m microbatches and keeps m).
/// The microbatches written are the counts plus `offset` (a direction's first microbatch in DualPipe).
struct stage_cursor {
  int stage = 0;
  int offset = 0;
  int forwards = 0, backwards = 0, weights = 0;

  template <class Sink>
  constexpr void forward(Sink& out, int rank, int limit) {
    if (forwards < limit) out.push(rank, make_compute(op_kind::forward, stage, offset + forwards));
    ++forwards;
  }
  template <class Sink>
  constexpr void input(Sink& out, int rank, int limit) {
    if (backwards < limit) out.push(rank, make_compute(op_kind::backward_input, stage, offset + backwards));
    ++backwards;
  }
  template <class Sink>
  constexpr void full_backward(Sink& out, int rank, int limit) {
    if (backwards < limit) out.push(rank, make_compute(op_kind::backward, stage, offset + backwards));
    ++backwards;
  }
  template <class Sink>
  constexpr void weight(Sink& out, int rank, int limit) {
    if (weights < limit) out.push(rank, make_compute(op_kind::backward_weight, stage, offset + weights));
    ++weights;
  }
};

}  // namespace ctpipe::detail
