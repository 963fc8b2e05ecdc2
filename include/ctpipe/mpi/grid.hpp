// The MPI executor's options, and where a process sits in the pipeline x data-parallel grid
// (ctpipe/exec/grid.hpp: process p runs pipeline rank p / D of replica p % D). Plain constexpr: no
// MPI.
#pragma once

#include <chrono>
#include <string>

#include <ctpipe/exec/grid.hpp>

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
  /// The hang report's folder (docs/hang_report.md): on a timeout, a failure, a peer's failure
  /// notice, a signal that ends the process or the executor's end, each process writes where it
  /// stands in its program to DIR/process-P.json, for `ctpipe hang-report DIR`. Empty: the
  /// environment's CTPIPE_REPORT_DIR, and none where that is unset (the default: nothing written).
  std::string report_dir{};
};

// The grid (ctpipe/exec/grid.hpp), by its names in ctpipe::mpi too.
using ctpipe::place;
using ctpipe::place_of;
using ctpipe::process_of;

}  // namespace ctpipe::mpi
