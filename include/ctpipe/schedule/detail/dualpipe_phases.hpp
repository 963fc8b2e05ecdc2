// The eight phases of DeepSeek's DualPipe on one rank, shared by DualPipeV (V placement, one
// pipeline) and DualPipe (two pipelines fed from both ends, which on each rank runs the phases of
// DualPipeV with half the ranks and half the microbatches).
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

/// Writes rank `rank`'s ops: the rank is the h-th of `p` in the phases' terms, runs `m` microbatches
/// per chunk, and chunk 0 is the stage it meets first (c0), chunk 1 the one it meets later (c1):
/// (1) 2(p-h-1) F0; (2) h+1 x [F0, F1]; (3) p-h-1 x [I1 (its W queued), W, F1];
/// (4) m-2p+h+1 x [F0&B1, F1&B0] (for h = p-1 the very first F0&B1 is F0 then B1);
/// (5) p-h-1 x [B1, F1&B0]; (6) h+1 x [B1, B0], from iteration (h+1)/2 on as I (W queued): before
/// B1 for odd h, between B1 and B0 for even h; (7) p-h-1 x [W, I0]; (8) h+1 x W. W always takes the
/// oldest queued one.
template <class Sink>
constexpr void dualpipe_phases(Sink& out, int rank, int h, int p, int m, stage_cursor c0, stage_cursor c1) {
  // The queue of W: (microbatch, chunk) of each I whose W waits, oldest first, as 2 mb + chunk.
  // Scratch memory: fine in constant evaluation.
  buffer<int> fifo(2 * static_cast<std::size_t>(m));
  std::size_t head = 0, tail = 0;
  auto input = [&](stage_cursor& c, int chunk) {
    fifo.data()[tail++] = 2 * c.backwards + chunk;
    c.input(out, rank, m);
  };
  auto weight = [&]() {
    const int entry = fifo.data()[head++];
    const stage_cursor& c = entry % 2 == 0 ? c0 : c1;
    out.push(rank, make_compute(op_kind::backward_weight, c.stage, c.offset + entry / 2));
  };
  auto full = [&](stage_cursor& c) { c.full_backward(out, rank, m); };
  auto pair = [&](stage_cursor& f, stage_cursor& b) {
    out.push(rank, make_overlapped_forward(f.stage, f.offset + f.forwards++));
    b.full_backward(out, rank, m);
  };
  for (int k = 0; k < 2 * (p - h - 1); ++k) c0.forward(out, rank, m);
  for (int k = 0; k < h + 1; ++k) {
    c0.forward(out, rank, m);
    c1.forward(out, rank, m);
  }
  for (int k = 0; k < p - h - 1; ++k) {
    input(c1, 1);
    weight();
    c1.forward(out, rank, m);
  }
  for (int k = 0; k < m - 2 * p + h + 1; ++k) {
    if (k == 0 && h == p - 1) {
      c0.forward(out, rank, m);
      full(c1);
    } else {
      pair(c0, c1);
    }
    pair(c1, c0);
  }
  for (int k = 0; k < p - h - 1; ++k) {
    full(c1);
    pair(c1, c0);
  }
  for (int k = 0; k < h + 1; ++k) {
    // The switch to I: at iteration (h+1)/2, before B1 for odd h, between B1 and B0 for even h.
    const int at = (h + 1) / 2;
    if (k > at || (k == at && h % 2 == 1))
      input(c1, 1);
    else
      full(c1);
    if (k >= at)
      input(c0, 0);
    else
      full(c0);
  }
  for (int k = 0; k < p - h - 1; ++k) {
    weight();
    input(c0, 0);
  }
  for (int k = 0; k < h + 1; ++k) weight();
}

}  // namespace ctpipe::detail
