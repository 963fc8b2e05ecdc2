// What a device executor's step calls where an update is attached to it (ctpipe::cuda::device_optimizer,
// cuda/optimizer.hpp): the update's scalars written before the step (outside any capture, as the
// step's number is), and within the step, after every rank's last task, three phases the engine
// brackets with its fork and join events: each rank's layers' terms of the global norm on the
// rank's stream, the decision (the norm, the clip scale, whether to skip) on the origin stream, and
// each rank's update on its stream. A graph step captures the phases with the tasks; a replay reads
// the scalars written before it.
#pragma once

namespace ctpipe::cuda::detail {

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
  /// The terms summed in layer order; the norm, the clip scale and the skip decided; on `origin`.
  virtual void decide(stream_type origin) = 0;
  /// Rank r's layers updated, on its stream.
  virtual void apply(int r, stream_type s) = 0;
  /// The step was waited for (`done`), or abandoned while it was issued.
  virtual void finished(bool done) = 0;

 protected:
  ~update_hook() = default;
};

}  // namespace ctpipe::cuda::detail
