// Where a process sits in a pipeline x data-parallel grid: the layout every executor with one
// process per rank uses (MPI, NCCL). Plain constexpr.
//
// Layout: process p runs pipeline rank p / D of replica p % D (D replicas). The D copies of one
// pipeline rank are neighbours, so a hostfile that fills each machine in order puts them on one
// machine: the gradient sums (every parameter of the rank, once a step) stay on the machine's fast
// links, and only the pipeline's hand-offs (one boundary tensor a microbatch) cross machines. This
// is Megatron-LM's order too (data parallel inside, pipeline outermost).
#pragma once

namespace ctpipe {

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

}  // namespace ctpipe
