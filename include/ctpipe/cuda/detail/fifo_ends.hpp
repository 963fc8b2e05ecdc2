// One rank's ends of the FIFOs of a process-mode table (cuda/detail/process_mode.hpp: fifo_layout),
// as run-time values: what the transports of the executors of one process per rank (the NCCL
// executor's, the MPI device path's) need of the table to make and run their links, read at run
// time so that they are compiled once per backend and not once per rank of every executor.
#pragma once

#include <array>

#include <ctpipe/detail/index.hpp>

namespace ctpipe::cuda::detail {

/// FIFO 2e + d (edge e; d = 0 its activations, 1 its gradients) as one rank sees it.
struct fifo_end {
  bool here = false;               // the FIFO joins two ranks, and this rank is one of them
  bool sends = false;              // this rank is its sender
  bool skip = false;               // the edge is a crossing's (a skip connection), not a boundary
  int peer = -1;                   // the rank at its other end
  int producer = 0, consumer = 0;  // the edge's stages
  int capacity = 0;                // the edge's ring slots
};

/// Rank `Rank`'s ends of the FIFOs of `Fifos` (a fifo_layout).
template <int Rank, auto Fifos>
consteval auto make_fifo_ends() {
  const int boundaries = static_cast<int>(Fifos.stage_rank.size()) - 1;
  std::array<fifo_end, ctpipe::detail::ix(2 * Fifos.edges())> ends{};
  for (int e = 0; e < Fifos.edges(); ++e)
    for (int d = 0; d < 2; ++d) {
      fifo_end& x = ends[ctpipe::detail::ix(2 * e + d)];
      x.sends = Fifos.sender(e, d) == Rank;
      x.here = Fifos.crosses(e) && (x.sends || Fifos.receiver(e, d) == Rank);
      x.skip = e >= boundaries;
      x.peer = x.sends ? Fifos.receiver(e, d) : Fifos.sender(e, d);
      x.producer = Fifos.producer(e);
      x.consumer = Fifos.consumer(e);
      x.capacity = Fifos.capacity[ctpipe::detail::ix(e)];
    }
  return ends;
}

}  // namespace ctpipe::cuda::detail
