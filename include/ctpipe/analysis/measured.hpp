// What really ran: the start and end of every task of one step as an executor recorded it
// (measured_step), and how it compares with its replay: the same table run with each compute task
// taking its measured time and messages free, i.e. when each task would have started had only the
// table's order and dependencies held it back. A task that started later than its replay waited on
// something the table does not say (a hand-off's latency, the operating system, another process);
// the tasks where that wait grew are the ones that ran late. Pictures of it: format/measured.hpp.
// Run time only; knows nothing of executors (they fill a measured_step).
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/detail/index.hpp>  // ix

namespace ctpipe {

/// One task's times, in seconds from the step's start (both -1: it did not run).
struct measured_task {
  double start = -1.0, end = -1.0;
  constexpr bool ran() const { return end >= 0.0; }
  constexpr bool operator==(const measured_task&) const = default;
};

/// One step as it ran: per rank, per position of the executor's (lowered) table, its task's times.
struct measured_step {
  std::vector<std::vector<measured_task>> ranks;
};

/// A compute task that started later than its replay, by more than the task before it on its rank.
struct late_task {
  int rank = 0, position = 0;
  task op{};
  double started = 0.0;   // measured start
  double replayed = 0.0;  // start in the replay
  double added = 0.0;     // its wait (started - replayed) less the wait of the compute task before it
};

/// Measured against the replay.
struct step_comparison {
  double measured = 0.0;                                   // the last task's end
  double replayed = 0.0;                                   // the replay's makespan
  std::vector<double> busy, measured_span, replayed_span;  // per rank: compute time, first start to last end
  std::vector<late_task> late;                             // every compute task whose wait grew, most added first
  // Where a cost model was given: its makespan for the table, and each rank's compute in it.
  double predicted = 0.0;
  std::vector<double> predicted_busy;
};

namespace detail {

inline void check_measured(int ranks, const std::vector<std::size_t>& lengths, const measured_step& m) {
  if (static_cast<int>(m.ranks.size()) != ranks)
    throw std::invalid_argument("measured step: " + std::to_string(m.ranks.size()) + " ranks, the table has " +
                                std::to_string(ranks));
  for (int r = 0; r < ranks; ++r)
    if (m.ranks[ix(r)].size() != lengths[ix(r)])
      throw std::invalid_argument("measured step: rank " + std::to_string(r) + " has " +
                                  std::to_string(m.ranks[ix(r)].size()) + " tasks, the table " +
                                  std::to_string(lengths[ix(r)]));
}

// The measured durations as a cost model (comm ops cost nothing in the simulation anyway).
struct measured_costs {
  std::vector<double> duration;  // by (op, stage, microbatch), as table_index keys them
  int stages = 1, microbatches = 1;
  double comm = 0.0;
  double operator()(const task& t) const {
    return duration[(static_cast<std::size_t>(t.op) * ix(stages) + ix(t.stage)) * ix(microbatches) + ix(t.microbatch)];
  }
};
template <table_like Table>
measured_costs costs_of_measured(const Table& t, const measured_step& m) {
  measured_costs c{std::vector<double>(ix(op_kind_count) * ix(t.stages()) * ix(t.microbatches()), 0.0), t.stages(),
                   t.microbatches()};
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      const measured_task& y = m.ranks[ix(r)][i];
      if (is_comm(x.op) || !y.ran() || x.stage < 0 || x.stage >= t.stages() || x.microbatch < 0 ||
          x.microbatch >= t.microbatches())
        continue;
      // An overlapped pair ran as one: its time on its first half.
      const double d = y.end - y.start;
      c.duration[(static_cast<std::size_t>(x.op) * ix(t.stages()) + ix(x.stage)) * ix(t.microbatches()) +
                 ix(x.microbatch)] = d > 0.0 ? d : 0.0;
    }
  }
  return c;
}

// The measured durations with each message priced by a cost model (its message(send), or comm).
template <cost_function Model>
struct measured_with_messages : measured_costs {
  const Model* model = nullptr;
  double message(const task& send) const { return message_cost(*model, send); }
};

// The comparison, replayed with `replay_costs`.
template <table_like Table, class Replay>
step_comparison compare_replayed(const Table& t, const measured_step& m, const Replay& replay_costs) {
  const std::vector<std::size_t> lengths = [&] {
    std::vector<std::size_t> l;
    for (int r = 0; r < t.ranks(); ++r) l.push_back(t.program(r).size());
    return l;
  }();
  std::vector<std::vector<double>> replay_start(ix(t.ranks())), replay_end(ix(t.ranks()));
  for (int r = 0; r < t.ranks(); ++r) {
    replay_start[ix(r)].assign(lengths[ix(r)], 0.0);
    replay_end[ix(r)].assign(lengths[ix(r)], 0.0);
  }
  const double replayed = simulate(t, replay_costs, [&](int r, int i, double s, double e) {
                            replay_start[ix(r)][ix(i)] = s;
                            replay_end[ix(r)][ix(i)] = e;
                          }).makespan;
  double measured = 0.0;
  for (const auto& row : m.ranks)
    for (const measured_task& x : row) measured = std::max(measured, x.end);
  step_comparison out{measured, replayed, {}, {}, {}, {}, 0.0, {}};
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    double busy = 0.0, first = -1.0, last = 0.0, rfirst = -1.0, rlast = 0.0, wait_before = 0.0;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const measured_task& y = m.ranks[detail::ix(r)][i];
      if (is_comm(prog[i].op) || !y.ran()) continue;
      busy += y.end - y.start;
      if (i > 0 && prog[i - 1].overlapped) continue;  // a pair's second half: its start is its first's end
      first = first < 0.0 ? y.start : first;
      last = std::max(last, y.end);
      const double rs = replay_start[detail::ix(r)][i];
      rfirst = rfirst < 0.0 ? rs : rfirst;
      rlast = std::max(rlast, replay_end[detail::ix(r)][i]);
      const double wait = y.start - rs;
      if (wait - wait_before > 0.0)
        out.late.push_back({r, static_cast<int>(i), prog[i], y.start, rs, wait - wait_before});
      wait_before = wait;
    }
    out.busy.push_back(busy);
    out.measured_span.push_back(first < 0.0 ? 0.0 : last - first);
    out.replayed_span.push_back(rfirst < 0.0 ? 0.0 : rlast - rfirst);
  }
  std::stable_sort(out.late.begin(), out.late.end(),
                   [](const late_task& a, const late_task& b) { return a.added > b.added; });
  return out;
}

inline void check_shape(const auto& t, const measured_step& m) {
  std::vector<std::size_t> lengths;
  for (int r = 0; r < t.ranks(); ++r) lengths.push_back(t.program(r).size());
  check_measured(t.ranks(), lengths, m);
}

}  // namespace detail

/// Measured against the replay (see the top of this header). Throws std::invalid_argument when `m`
/// does not have the table's shape.
template <table_like Table>
step_comparison compare_measured(const Table& t, const measured_step& m) {
  detail::check_shape(t, m);
  return detail::compare_replayed(t, m, detail::costs_of_measured(t, m));
}

/// The same, with a cost model for what the measurement lacks: the replay charges each message
/// `cost`'s time for it (with microbatch_scaled and scale_messages, its microbatch's length's), and
/// `predicted` is the makespan `cost` gives the table (with per-microbatch factors, such as
/// extent_factors of the step's extents: what a step of those lengths should take), with each
/// rank's compute in `predicted_busy`.
template <table_like Table, cost_function Cost>
step_comparison compare_measured(const Table& t, const measured_step& m, const Cost& cost) {
  detail::check_shape(t, m);
  step_comparison out =
      detail::compare_replayed(t, m, detail::measured_with_messages<Cost>{detail::costs_of_measured(t, m), &cost});
  const auto predicted = analyse(t, cost);
  out.predicted = predicted.makespan;
  out.predicted_busy.assign(predicted.busy.begin(), predicted.busy.end());
  return out;
}

/// One stage's compute in a measured step, per microbatch (the mean over the step's microbatches):
/// its forward, and its backward (B, or I + W where the table splits it), in seconds.
struct stage_time {
  double forward = 0.0, backward = 0.0;
  constexpr bool operator==(const stage_time&) const = default;
};

/// Each stage's compute as `m` measured it (the table's stages, in order): what the planner's
/// calibration takes (planner/calibrate.hpp). Throws std::invalid_argument when `m` does not have
/// the table's shape, when the table overlaps pairs F&B (a pair runs as one task: its halves are not
/// told apart), or when a compute task of the table did not run.
template <table_like Table>
std::vector<stage_time> stage_times(const Table& t, const measured_step& m) {
  detail::check_shape(t, m);
  std::vector<stage_time> out(detail::ix(t.stages()));
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      if (is_comm(x.op)) continue;
      if (x.overlapped)
        throw std::invalid_argument("stage times: rank " + std::to_string(r) +
                                    " overlaps a pair F&B, whose halves a measured step does not tell apart");
      const measured_task& y = m.ranks[detail::ix(r)][i];
      if (!y.ran())
        throw std::invalid_argument("stage times: rank " + std::to_string(r) + ", position " + std::to_string(i) +
                                    ": a compute task that did not run");
      const double d = std::max(0.0, y.end - y.start) / t.microbatches();
      (x.op == op_kind::forward ? out[detail::ix(x.stage)].forward : out[detail::ix(x.stage)].backward) += d;
    }
  }
  return out;
}

}  // namespace ctpipe
