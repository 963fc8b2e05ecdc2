// The MPI executor's recording of what really ran (mpi::executor::record_steps): each process
// times its rank's tasks on its own steady clock; at a recorded step's start process 0 measures
// every other process's clock against its own (a few ping-pongs each, the one of shortest round
// trip kept: offset = the peer's time - the midpoint of process 0's send and receive, within half
// that round trip); at the step's end every process's times go to process 0, which puts them on
// its clock, from the first process's start of the step, one measured_step per replica
// (analysis/measured.hpp). The device path records its rank's tasks on the GPU (timed events,
// cuda/detail/task_events.hpp), puts them on the host's clock and hands them over here: the same
// clocks and gather.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/mpi/detail/session.hpp>

namespace ctpipe::mpi::detail {

class step_recorder {
 public:
  static constexpr int pings = 4;  // ping-pongs per process and recorded step

  // `lengths`: each rank's program length (the executor's lowered table).
  step_recorder(const place& w, std::vector<int> lengths) : lengths_(std::move(lengths)) {
    // (and the step's start, and how far this process's own times may be off: the device path's)
    row_.resize(2 * ctpipe::detail::ix(lengths_[ctpipe::detail::ix(w.rank)]) + 2);
    if (w.process != 0) return;
    steps_.resize(ctpipe::detail::ix(w.replicas));
    for (measured_step& m : steps_) {
      m.ranks.resize(lengths_.size());
      for (std::size_t r = 0; r < lengths_.size(); ++r) m.ranks[r].resize(ctpipe::detail::ix(lengths_[r]));
    }
    counts_.resize(ctpipe::detail::ix(w.processes));
    displs_.resize(counts_.size());
    int at = 0;
    for (int p = 0; p < w.processes; ++p) {
      counts_[ctpipe::detail::ix(p)] = 2 * lengths_[ctpipe::detail::ix(place_of(p, w.ranks, w.replicas).rank)] + 2;
      displs_[ctpipe::detail::ix(p)] = at;
      at += counts_[ctpipe::detail::ix(p)];
    }
    all_.resize(ctpipe::detail::ix(at));
    offsets_.resize(counts_.size());
  }

  static double now() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  // Task i's start and end, on this process's clock (a task that does not end keeps -1).
  void start(std::size_t i) noexcept { row_[2 * i] = now(); }
  void end(std::size_t i) noexcept { row_[2 * i + 1] = now(); }
  // The device path: this process's times, written after its step (on this process's clock, as
  // now()): (start, end) per task, then the step's start; `error`: how far they may be off.
  std::span<double> times() noexcept { return {row_.data(), row_.size() - 1}; }
  void set_own_error(double error) noexcept { row_.back() = error; }

  // Collective, before a recorded step: the clocks measured against process 0's (nothing after a
  // timeout: the step then refuses to run).
  void begin(session& s) {
    std::fill(row_.begin(), row_.end(), -1.0);
    row_.back() = 0.0;
    if (s.broken()) return;
    const place& w = s.where();
    if (w.process == 0) {
      error_ = 0.0;
      for (int p = 1; p < w.processes; ++p) {
        double best = -1.0;
        for (int k = 0; k < pings; ++k) {
          double theirs = 0.0;
          const double sent = now();
          exchange(s, p, &sent, &theirs);
          const double back = now(), trip = back - sent;
          if (best < 0.0 || trip < best) {
            best = trip;
            offsets_[ctpipe::detail::ix(p)] = theirs - 0.5 * (sent + back);
          }
        }
        error_ = std::max(error_, 0.5 * best);
      }
    } else {
      for (int k = 0; k < pings; ++k) {
        double mine = 0.0, ignored = 0.0;
        receive(s, 0, &ignored);
        mine = now();
        send(s, 0, &mine);
      }
    }
    row_[row_.size() - 2] = now();  // where this process's step starts
  }
  // Collective, after a step every process completed: the times to process 0, on its clock.
  void gather(session& s) {
    const place& w = s.where();
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Igatherv(row_.data(), static_cast<int>(row_.size()), MPI_DOUBLE, all_.data(), counts_.data(),
                       displs_.data(), MPI_DOUBLE, 0, s.data(), &q),
          "MPI_Igatherv");
    s.wait<false>(q, [] { return std::string("gathering the recorded step's times (record_steps)"); });
    if (w.process != 0) return;
    // The step starts where the first process started it (process 0 measures the clocks one
    // process after another, so the others start theirs before it does).
    double t0 = 0.0, own = 0.0;
    for (int p = 0; p < w.processes; ++p) {
      const std::size_t last = ctpipe::detail::ix(displs_[ctpipe::detail::ix(p)] + counts_[ctpipe::detail::ix(p)] - 1);
      const double start = all_[last - 1] - offsets_[ctpipe::detail::ix(p)];
      t0 = p == 0 ? start : std::min(t0, start);
      own = std::max(own, all_[last]);
    }
    // Two processes' times may be off by both their own errors, beside their clocks'.
    error_ += 2.0 * own;
    for (int p = 0; p < w.processes; ++p) {
      const place at = place_of(p, w.ranks, w.replicas);
      auto& out = steps_[ctpipe::detail::ix(at.replica)].ranks[ctpipe::detail::ix(at.rank)];
      const double* in = all_.data() + displs_[ctpipe::detail::ix(p)];
      const double shift = offsets_[ctpipe::detail::ix(p)] + t0;  // their clock -> seconds from the step's start
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = in[2 * i + 1] < 0.0
                     ? measured_task{}
                     : measured_task{std::max(0.0, in[2 * i] - shift), std::max(0.0, in[2 * i + 1] - shift)};
    }
  }

  /// Process 0: replica `d`'s pipeline in the last recorded step; elsewhere empty.
  const measured_step& step(int d) const noexcept {
    static const measured_step none{};
    return ctpipe::detail::ix(d) < steps_.size() ? steps_[ctpipe::detail::ix(d)] : none;
  }
  /// Process 0: the alignment's error bound in the last recorded step (seconds: the largest half
  /// round trip kept, plus twice the largest error of a process's own times); 0 elsewhere.
  double alignment_error() const noexcept { return error_; }

 private:
  static constexpr int clock_tag = 2;  // on the session's control communicator (1: failure notices)
  void exchange(session& s, int p, const double* out, double* in) {
    send(s, p, out);
    receive(s, p, in);
  }
  void send(session& s, int p, const double* v) {
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Isend(v, 1, MPI_DOUBLE, p, clock_tag, s.control(), &q), "MPI_Isend");
    s.wait<false>(q, [] { return std::string("aligning the clocks (record_steps)"); });
  }
  void receive(session& s, int p, double* v) {
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Irecv(v, 1, MPI_DOUBLE, p, clock_tag, s.control(), &q), "MPI_Irecv");
    s.wait<false>(q, [] { return std::string("aligning the clocks (record_steps)"); });
  }

  std::vector<int> lengths_;
  std::vector<double> row_;            // this process: (start, end) per task, its start, its own error
  std::vector<measured_step> steps_;   // process 0: per replica
  std::vector<int> counts_, displs_;   // process 0: the gather's layout
  std::vector<double> all_, offsets_;  // process 0: every row; each process's clock - ours
  double error_ = 0.0;
};

}  // namespace ctpipe::mpi::detail
