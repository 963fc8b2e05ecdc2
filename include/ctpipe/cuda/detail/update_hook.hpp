// What a device executor's step calls where an update is attached to it (ctpipe::cuda::device_optimizer,
// cuda/optimizer.hpp): the update's scalars written before the step (outside any capture, as the
// step's number is), and within the step, after every rank's last task, three phases the engine
// brackets with its fork and join events: each rank's layers' terms of the global norm on the
// rank's stream, the decision (the norm, the clip scale, whether to skip) on the origin stream, and
// each rank's update on its stream. With a process per rank, the terms meet in the transport's
// sum at the step's end (one collective with the losses and statuses), before the decision. A
// graph step captures the phases with the tasks; a replay reads the scalars written before it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <ctpipe/cuda/detail/update_kernels.hpp>  // process_sums

namespace ctpipe::cuda::detail {

/// The processes of a job do not all have a device optimizer attached to their executor
/// (`attached` of `processes` do; `mine`: this one does): std::logic_error from every process, the
/// step's update skipped on all of them.
[[noreturn]] inline void throw_updates_differ(std::string_view who, int rank, int replica, int process, int attached,
                                              int processes, bool mine) {
  throw std::logic_error(
      std::string(who) + ": rank " + std::to_string(rank) + ", replica " + std::to_string(replica) + " (process " +
      std::to_string(process) + "): " + std::to_string(attached) + " of the " + std::to_string(processes) +
      " processes have a device optimizer attached to their executor (this one " + (mine ? "has" : "has not") +
      "): every process attaches one, or none; the step's update was skipped on every process");
}

/// Where an executor runs a model's layers, for device_update: the rank of each layer (-1: not in
/// this process), the device and the stream of each rank (rank 0's device is the origin stream's),
/// and whether a step is in flight (check_between_steps throws std::logic_error then). An executor
/// of one process per rank (`processes`) places its own rank as rank 0, and says which of its
/// layers this process counts in the norm (`counted`, per layer: a replica's copy, or a layer
/// another process holds too, is counted by one).
template <class Backend>
struct update_placement {
  std::vector<int> rank_of_layer, device_of_rank;
  std::vector<typename Backend::stream_type> streams;
  bool processes = false;
  std::vector<unsigned char> counted;
  const void* executor = nullptr;
  void (*check_between_steps)(const void*) = nullptr;
};

/// What the engine's step calls (see the top of this file).
template <class Backend>
class update_hook {
 public:
  using stream_type = typename Backend::stream_type;
  /// Before a step is issued: throws (std::logic_error) where the step before it was not waited for.
  virtual void check_ready() const = 0;
  /// The step's scalars into device memory, on `origin` (before the step, outside any capture).
  virtual void write_scalars(stream_type origin) = 0;
  /// Within the step, rank r's layers' terms of the norm, on its stream (the current device is the rank's).
  virtual void terms(int r, stream_type s) = 0;
  /// The executors of one process per rank: this process's terms after terms() (layers + 2 words
  /// of device memory, fold_op's), which the transport sums over every process with the step's end.
  virtual const double* process_terms() const = 0;
  /// The terms summed in layer order; the norm, the clip scale and the skip decided; on `origin`.
  /// `p`: every process's terms and statuses, summed (the executors of one process per rank), or null.
  virtual void decide(stream_type origin, const process_sums* p) = 0;
  /// Rank r's layers updated, on its stream.
  virtual void apply(int r, stream_type s) = 0;
  /// The step was waited for (`done`), or abandoned while it was issued.
  virtual void finished(bool done) = 0;

 protected:
  ~update_hook() = default;
};

}  // namespace ctpipe::cuda::detail
