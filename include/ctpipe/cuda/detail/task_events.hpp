// What really ran on the GPU (record_steps of the executors of device tasks): a timed event on a
// rank's stream before and after each of its tasks, and one where the rank's stream starts the
// step (after the step's fork); read once the step is over, each task's start and end in seconds
// from the step's start, on the GPU's clock. Ranks on one device are put on one clock through their
// start events; ranks on other devices are taken to start the step together (each start event
// completes when its stream has waited for the step's fork: off by a launch's latency at most).
// Made once, at the first recorded step; nothing is allocated per step. The executors of one
// process per rank put their rank's times on the host's clock (anchor, read_host), where the
// transport aligns them with the other processes' and gathers them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/cuda/detail/engine_errors.hpp>  // backend_calls
#include <ctpipe/detail/index.hpp>               // ix

namespace ctpipe::cuda::detail {

template <class Backend>
class task_events {
 public:
  using event_type = typename Backend::event_type;
  using stream_type = typename Backend::stream_type;

  task_events() = default;
  task_events(const task_events&) = delete;
  task_events& operator=(const task_events&) = delete;
  ~task_events() { release(); }

  /// Rank r's program has lengths[r] tasks and runs on devices[r]; only the ranks `mine(r)` holds
  /// (every rank of a one-process executor, one of a process per rank) get events.
  template <class Mine>
  void make(std::span<const int> lengths, std::span<const int> devices, Mine mine) {
    if (made_) return;
    step_.ranks.assign(lengths.size(), {});
    ranks_.resize(lengths.size());
    devices_.assign(devices.begin(), devices.end());
    try {
      for (std::size_t r = 0; r < lengths.size(); ++r) {
        step_.ranks[r].resize(ctpipe::detail::ix(lengths[r]));
        if (!mine(static_cast<int>(r))) continue;
        if (anchor_device_ < 0) anchor_device_ = devices_[r];      // (its event made by anchor(), where used)
        ranks_[r].resize(2 * ctpipe::detail::ix(lengths[r]) + 1);  // (start, end) per task, then the step's start
        for (event_type& e : ranks_[r]) {
          backend_calls<Backend>::check(Backend::timing_event_create(&e, devices_[r]), "cudaEventCreate",
                                        "record_steps: a task's timed event");
          ++made_events_;
        }
      }
    } catch (...) {
      release();
      throw;
    }
    made_ = true;
  }
  bool made() const noexcept { return made_; }

  // Issued in the step, on rank r's stream: where it starts the step (before its first task),
  // and task i's start and end.
  void begin(int r, stream_type s) const { record(ranks_[ctpipe::detail::ix(r)].back(), s, "the step's start"); }
  void start(int r, std::size_t i, stream_type s) const {
    record(ranks_[ctpipe::detail::ix(r)][2 * i], s, "a task's start");
  }
  void end(int r, std::size_t i, stream_type s) const {
    record(ranks_[ctpipe::detail::ix(r)][2 * i + 1], s, "a task's end");
  }

  /// Once the step is over (its streams synchronised): each task's times, in seconds from the
  /// earliest start of a rank's stream on its device (the ranks this object holds).
  const measured_step& read() {
    // Each rank's times on its device's clock (zero: where the device's first rank started the
    // step), then every rank from the earliest start (ranks of one device may start a little apart).
    double t0 = 0.0;
    bool first = true;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      auto& row = step_.ranks[r];
      std::fill(row.begin(), row.end(), measured_task{});
      if (ranks_[r].empty()) continue;
      const event_type zero = ranks_[first_on_device(r)].back();
      for (std::size_t i = 0; i < row.size(); ++i)
        row[i] = {seconds(zero, ranks_[r][2 * i]), seconds(zero, ranks_[r][2 * i + 1])};
      const double start = seconds(zero, ranks_[r].back());
      t0 = first ? start : std::min(t0, start);
      first = false;
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      if (!ranks_[r].empty())
        for (measured_task& t : step_.ranks[r]) t = {std::max(0.0, t.start - t0), std::max(0.0, t.end - t0)};
    return step_;
  }
  const measured_step& step() const noexcept { return step_; }
  /// Before a recorded step, its stream idle: where the GPU's clock stands on the host's steady
  /// clock (an event recorded on `s` and waited for, between two readings of the host's clock).
  void anchor(stream_type s) {
    if (!anchor_made_) {
      backend_calls<Backend>::check(Backend::timing_event_create(&anchor_, anchor_device_), "cudaEventCreate",
                                    "record_steps: the clocks' anchor");
      anchor_made_ = true;
    }
    const double before = host_now();
    record(anchor_, s, "the clocks' anchor");
    backend_calls<Backend>::check(Backend::event_synchronize(anchor_), "cudaEventSynchronize",
                                  "record_steps: the clocks' anchor");
    const double after = host_now();
    anchor_host_ = 0.5 * (before + after);
    anchor_error_ = 0.5 * (after - before);
  }
  /// How far read_host's times may be off the host's clock: half the anchor's wait.
  double anchor_error() const noexcept { return anchor_error_; }
  /// Once the step is over: rank r's times on the host's steady clock (seconds since its epoch,
  /// as std::chrono::steady_clock's): `out` gets (start, end) per task, then the rank's start.
  void read_host(int r, std::span<double> out) const {
    const auto& row = ranks_[ctpipe::detail::ix(r)];
    for (std::size_t k = 0; k < row.size() && k < out.size(); ++k) out[k] = anchor_host_ + seconds(anchor_, row[k]);
  }
  static double host_now() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  /// A step that failed: no task's times.
  void clear() noexcept {
    for (auto& row : step_.ranks) std::fill(row.begin(), row.end(), measured_task{});
  }

 private:
  void record(event_type e, stream_type s, const char* what) const {
    backend_calls<Backend>::check(Backend::record(e, s), "cudaEventRecord", what);
  }
  double seconds(event_type from, event_type to) const {
    float ms = 0.0f;
    backend_calls<Backend>::check(Backend::elapsed_ms(&ms, from, to), "cudaEventElapsedTime",
                                  "record_steps: reading a task's time");
    return 1e-3 * static_cast<double>(ms);
  }
  // The first rank with events on rank r's device.
  std::size_t first_on_device(std::size_t r) const noexcept {
    for (std::size_t k = 0; k < r; ++k)
      if (!ranks_[k].empty() && devices_[k] == devices_[r]) return k;
    return r;
  }
  // (In the order make() created them: where it failed part way, only those.)
  void release() noexcept {
    for (auto& row : ranks_)
      for (event_type& e : row)
        if (made_events_ > 0) {
          (void)Backend::event_destroy(e);
          --made_events_;
        }
    ranks_.clear();
    if (anchor_made_) (void)Backend::event_destroy(anchor_);
    anchor_made_ = made_ = false;
  }

  std::vector<std::vector<event_type>> ranks_;  // per rank: (start, end) per task, then the step's start
  std::vector<int> devices_;
  measured_step step_;
  std::size_t made_events_ = 0;
  bool made_ = false;
  event_type anchor_{};  // (the first rank's device: process mode holds one rank)
  bool anchor_made_ = false;
  int anchor_device_ = -1;  // the first rank's this object holds
  double anchor_host_ = 0.0, anchor_error_ = 0.0;
};

}  // namespace ctpipe::cuda::detail
