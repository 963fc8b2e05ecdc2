// Where a process sits in a pipeline x data-parallel grid, and the executor's options. Plain
// constexpr: no MPI.
//
// Layout: process p of the communicator runs pipeline rank p / D of replica p % D (D replicas). The
// D copies of one pipeline rank are neighbours, so a hostfile that fills each machine in order puts
// them on one machine: the gradient sums (every parameter of the rank, once a step) stay on the
// machine's fast links, and only the pipeline's hand-offs (one boundary tensor a microbatch) cross
// machines. This is Megatron-LM's order too (data parallel inside, pipeline outermost).
#pragma once

#include <chrono>

namespace ctpipe::mpi {

struct options {
  /// D, the number of data-parallel replicas of the pipeline; 0: the number of processes divided by
  /// the table's ranks. Either way the processes must number ranks x D.
  int replicas = 0;
  /// How long a process waits for one message, one gradient sum or the step's end before it gives
  /// up with timeout_error (a peer died or hangs). Long enough for the slowest task of a step.
  std::chrono::milliseconds timeout = std::chrono::seconds(600);
  /// Sends with MPI_Issend (complete only when the receive has matched) instead of MPI_Isend: the
  /// executor never depends on MPI buffering a message; this makes sure of it (the tests run so).
  bool synchronous_sends = false;
  /// Sums each stage's gradients across the D replicas in replica order, ((g0 + g1) + g2) + ...:
  /// a gather to replica 0, the additions there, and a broadcast, instead of MPI's all-reduce
  /// (whose order is the library's). Bitwise equal to sequential training for any D, at the cost of
  /// D x the rank's gradients in memory on replica 0 and a gather and a broadcast per layer. For
  /// D <= 2 both give the same bits.
  bool ordered_sums = false;
};

/// A process's place: its pipeline rank and its replica.
struct place {
  int process = 0, processes = 1;  // in the executor's communicator
  int rank = 0, ranks = 1;         // pipeline rank (which program it runs)
  int replica = 0, replicas = 1;   // data-parallel replica
  constexpr bool operator==(const place&) const = default;
};

/// The place of `process` in a grid of `ranks` pipeline ranks x `replicas` replicas.
constexpr place place_of(int process, int ranks, int replicas) {
  return {process, ranks * replicas, process / replicas, ranks, process % replicas, replicas};
}
/// The process that runs pipeline rank `rank` of replica `replica`.
constexpr int process_of(int rank, int replica, int replicas) { return rank * replicas + replica; }

}  // namespace ctpipe::mpi
