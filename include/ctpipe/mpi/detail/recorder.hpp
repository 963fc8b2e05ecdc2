// The MPI executor's recording of what really ran (record_steps, host and device paths): each
// process keeps its rank's times on its own steady clock (exec/detail/process_times.hpp); as a
// recorded step starts, every process times a few barriers on the control communicator (the
// clocks' alignment: no process leaves a barrier before every process has entered it); as it ends,
// one MPI_Igatherv brings every process's row to process 0, which puts them on its clock, one
// measured_step per replica. The host path times each task itself; the device path on its GPU
// (cuda/detail/task_events.hpp), put on the host's clock, and hands the times over.
#pragma once

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/process_times.hpp>
#include <ctpipe/mpi/detail/session.hpp>

namespace ctpipe::mpi::detail {

class step_recorder {
 public:
  // `lengths`: each rank's program length (the executor's lowered table).
  step_recorder(const place& w, const std::vector<int>& lengths) : t_(w, lengths) {
    if (w.process != 0) return;
    counts_.resize(ctpipe::detail::ix(w.processes));
    displs_.resize(counts_.size());
    int at = 0;
    for (int p = 0; p < w.processes; ++p) {
      counts_[ctpipe::detail::ix(p)] = static_cast<int>(
          ctpipe::detail::process_times::row_words(lengths[ctpipe::detail::ix(place_of(p, w.ranks, w.replicas).rank)]));
      displs_[ctpipe::detail::ix(p)] = at;
      at += counts_[ctpipe::detail::ix(p)];
    }
    all_.resize(ctpipe::detail::ix(at));
  }

  // Task i's start and end, on this process's clock (a task that does not end keeps -1).
  void start(std::size_t i) noexcept { t_.start(i); }
  void end(std::size_t i) noexcept { t_.end(i); }
  // The device path: (start, end) per task, then the step's start, written after its step; how
  // far they may be off this process's clock.
  std::span<double> times() noexcept { return t_.times(); }
  void set_own_error(double e) noexcept { t_.set_own_error(e); }

  // Collective, before a recorded step: the clocks' rounds (nothing after a timeout: the step
  // then refuses to run).
  void begin(session& s) {
    t_.clear();
    if (s.broken()) return;
    for (int k = 0; k < ctpipe::detail::process_times::rounds; ++k) {
      MPI_Request q = MPI_REQUEST_NULL;
      const double before = ctpipe::detail::process_times::now();
      check(MPI_Ibarrier(s.control(), &q), "MPI_Ibarrier");
      s.wait<false>(q, [] { return std::string("aligning the clocks (record_steps)"); });
      t_.set_round(k, before, ctpipe::detail::process_times::now());
    }
    t_.set_start(ctpipe::detail::process_times::now());  // where this process's step starts
  }
  // Collective, after a step every process completed: the rows to process 0, on its clock.
  void gather(session& s) {
    const std::span<const double> row = t_.row();
    MPI_Request q = MPI_REQUEST_NULL;
    check(MPI_Igatherv(row.data(), static_cast<int>(row.size()), MPI_DOUBLE, all_.data(), counts_.data(),
                       displs_.data(), MPI_DOUBLE, 0, s.data(), &q),
          "MPI_Igatherv");
    s.wait<false>(q, [] { return std::string("gathering the recorded step's times (record_steps)"); });
    if (s.where().process == 0)
      t_.assemble(all_, s.where(), [this](int p) { return ctpipe::detail::ix(displs_[ctpipe::detail::ix(p)]); });
  }

  /// Process 0: replica `d`'s pipeline in the last recorded step; elsewhere empty.
  const measured_step& step(int d) const noexcept { return t_.step(d); }
  /// Process 0: how far two processes' times in the last recorded step may be off one another
  /// (seconds: their clocks' alignment and their own times' errors); 0 elsewhere.
  double alignment_error() const noexcept { return t_.alignment_error(); }

 private:
  ctpipe::detail::process_times t_;
  std::vector<int> counts_, displs_;  // process 0: the gather's layout
  std::vector<double> all_;           // process 0: every row
};

}  // namespace ctpipe::mpi::detail
