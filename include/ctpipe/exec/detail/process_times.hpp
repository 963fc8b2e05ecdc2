// What every process ran, on one clock (record_steps of the executors of one process per rank:
// MPI's host and device paths, NCCL's). The arithmetic only: each transport times its rounds and
// gathers the rows with its own collectives.
//
// Each process keeps one row: its rank's tasks' (start, end) on its own steady clock, where its
// step started, how far its own times may be off (the device paths' GPU-to-host anchor), and
// `rounds` pairs (before, after): its clock just before it entered a collective that no process
// leaves before every process has entered it (a barrier, an all-reduce), and just after it left
// it. The moment the last process entered lies within every process's pair, so process p's clock
// minus process 0's lies within [before_p - after_0, after_p - before_0] in every round; the
// rounds' intersection bounds it (its midpoint taken, half its width the error). Process 0 puts
// every row on its clock, from the first process's start of the step, one measured_step per
// replica.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/grid.hpp>

namespace ctpipe::detail {

class process_times {
 public:
  static constexpr int rounds = 4;  // collectives that align the clocks, each recorded step
  /// The words of a row for a program of `length` tasks.
  static constexpr std::size_t row_words(int length) { return 2 * ix(length) + 2 + 2 * ix(rounds); }

  static double now() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  /// `lengths`: each rank's program length; `w`: this process's place (process 0 assembles).
  process_times(const place& w, std::span<const int> lengths)
      : lengths_(lengths.begin(), lengths.end()), length_(lengths_[ix(w.rank)]) {
    row_.resize(row_words(length_));
    if (w.process != 0) return;
    steps_.resize(ix(w.replicas));
    for (measured_step& m : steps_) {
      m.ranks.resize(lengths_.size());
      for (std::size_t r = 0; r < lengths_.size(); ++r) m.ranks[r].resize(ix(lengths_[r]));
    }
    offsets_.resize(ix(w.processes));
  }

  // This process's row, as the step goes.
  void clear() noexcept {
    std::fill(row_.begin(), row_.end(), -1.0);
    row_[start_at() + 1] = 0.0;
  }
  void start(std::size_t i) noexcept { row_[2 * i] = now(); }
  void end(std::size_t i) noexcept { row_[2 * i + 1] = now(); }
  /// (start, end) per task, then the step's start: written at once by a device path.
  std::span<double> times() noexcept { return {row_.data(), start_at() + 1}; }
  void set_start(double t) noexcept { row_[start_at()] = t; }
  void set_own_error(double e) noexcept { row_[start_at() + 1] = e; }
  /// Round k of the clocks' alignment: this clock before entering the collective and after it.
  void set_round(int k, double before, double after) noexcept {
    row_[start_at() + 2 + 2 * ix(k)] = before;
    row_[start_at() + 3 + 2 * ix(k)] = after;
  }
  std::span<const double> row() const noexcept { return row_; }
  std::span<double> row() noexcept { return row_; }

  /// Process 0, after the gather: process p's row at all[at(p)] (its words: row_words of its
  /// rank's length). Fills each replica's step and the error bound.
  template <class At>
  void assemble(std::span<const double> all, const place& w, At at) {
    const auto row_of = [&](int p) { return all.data() + at(p); };
    const auto start_of = [&](int p) { return 2 * ix(lengths_[ix(place_of(p, w.ranks, w.replicas).rank)]); };
    const double* zero = row_of(0) + start_of(0);
    double widest = 0.0, own = 0.0;
    for (int p = 0; p < w.processes; ++p) {
      const double* r = row_of(p) + start_of(p);
      own = std::max(own, r[1]);
      // Process p's clock less process 0's: the rounds' intersection (the narrowest round where
      // they do not meet: a clock that jumped).
      double lo = -1e300, hi = 1e300, best_lo = 0.0, best_hi = 0.0, best = -1.0;
      for (int k = 0; k < rounds; ++k) {
        const double l = r[2 + 2 * k] - zero[3 + 2 * k], h = r[3 + 2 * k] - zero[2 + 2 * k];
        lo = std::max(lo, l);
        hi = std::min(hi, h);
        if (best < 0.0 || h - l < best) best = h - l, best_lo = l, best_hi = h;
      }
      if (lo > hi) lo = best_lo, hi = best_hi;
      offsets_[ix(p)] = p == 0 ? 0.0 : 0.5 * (lo + hi);
      if (p != 0) widest = std::max(widest, 0.5 * (hi - lo));
    }
    // Two processes' times may be off one another by both their clocks' errors and both their own.
    error_ = 2.0 * widest + 2.0 * own;
    double t0 = 0.0;
    for (int p = 0; p < w.processes; ++p) {
      const double s = row_of(p)[start_of(p)] - offsets_[ix(p)];
      t0 = p == 0 ? s : std::min(t0, s);
    }
    for (int p = 0; p < w.processes; ++p) {
      const place at_p = place_of(p, w.ranks, w.replicas);
      auto& out = steps_[ix(at_p.replica)].ranks[ix(at_p.rank)];
      const double* in = row_of(p);
      const double shift = offsets_[ix(p)] + t0;  // its clock -> seconds from the step's start
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = in[2 * i + 1] < 0.0
                     ? measured_task{}
                     : measured_task{std::max(0.0, in[2 * i] - shift), std::max(0.0, in[2 * i + 1] - shift)};
    }
  }

  /// Process 0: replica d's pipeline in the last recorded step; elsewhere empty.
  const measured_step& step(int d) const noexcept {
    static const measured_step none{};
    return ix(d) < steps_.size() ? steps_[ix(d)] : none;
  }
  /// Process 0: how far two processes' times in the last recorded step may be off one another
  /// (seconds); 0 elsewhere.
  double alignment_error() const noexcept { return error_; }
  int length() const noexcept { return length_; }
  std::span<const int> lengths() const noexcept { return lengths_; }

 private:
  std::size_t start_at() const noexcept { return 2 * ix(length_); }

  std::vector<int> lengths_;
  int length_;
  std::vector<double> row_;           // this process's
  std::vector<measured_step> steps_;  // process 0: per replica
  std::vector<double> offsets_;       // process 0: each process's clock - its own
  double error_ = 0.0;
};

}  // namespace ctpipe::detail
