// Pictures and words of a measured step (analysis/measured.hpp): the rows as they ran with the
// replay beside them, as SVG and as Chrome trace events, and the comparison as text. Run time only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <istream>
#include <span>
#include <string>
#include <vector>

#include <ctpipe/analysis/measured.hpp>
#include <ctpipe/format/csv.hpp>  // format_error
#include <ctpipe/format/svg.hpp>
#include <ctpipe/format/trace.hpp>

namespace ctpipe {

namespace detail {

// The measured timeline of `t`, and its makespan; a task that did not run shows at 0 for 0.
template <table_like Table>
timeline measured_timeline(const Table& t, const measured_step& m, double& makespan) {
  std::vector<std::size_t> lengths;
  for (int r = 0; r < t.ranks(); ++r) lengths.push_back(t.program(r).size());
  check_measured(t.ranks(), lengths, m);
  timeline tl;
  makespan = 0.0;
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const auto& row = m.ranks[ix(r)];
    tl.start.emplace_back();
    tl.end.emplace_back();
    for (std::size_t i = 0; i < row.size(); ++i) {
      const measured_task& x = row[i];
      double end = x.ran() ? x.end : 0.0;
      // An overlapped pair F&B that ran as two tasks, one after the other: one item to its second's end.
      if (prog[i].overlapped && i + 1 < row.size() && is_compute(prog[i + 1].op) && row[i + 1].ran())
        end = std::max(end, row[i + 1].end);
      tl.start.back().push_back(x.ran() ? x.start : 0.0);
      tl.end.back().push_back(end);
      makespan = std::max(makespan, x.end);
    }
  }
  return tl;
}

}  // namespace detail

/// The comparison in a few lines: the step's figures and the `top` tasks that ran latest.
inline std::string comparison_text(const step_comparison& c, int top = 10) {
  auto us = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
    return std::string(buf);
  };
  std::string s = "measured step " + us(c.measured) + "; replayed with the measured task times " + us(c.replayed) +
                  " (the rest is waiting the table does not explain)\n";
  if (c.predicted > 0.0) s += "the cost model predicted " + us(c.predicted) + "\n";
  for (std::size_t r = 0; r < c.busy.size(); ++r)
    s += "rank " + std::to_string(r) + ": busy " + us(c.busy[r]) + ", span " + us(c.measured_span[r]) + " measured, " +
         us(c.replayed_span[r]) + " replayed" +
         (r < c.predicted_busy.size() ? ", busy " + us(c.predicted_busy[r]) + " predicted" : std::string()) + "\n";
  const int n = std::min(top, static_cast<int>(c.late.size()));
  if (n > 0) s += "ran late (wait added, beyond the replay):\n";
  for (int k = 0; k < n; ++k) {
    const late_task& x = c.late[detail::ix(k)];
    s += "  rank " + std::to_string(x.rank) + ", stage " + std::to_string(x.op.stage) + ", microbatch " +
         std::to_string(x.op.microbatch) + ", op " + std::string(op_name(x.op.op)) + ": started " + us(x.started) +
         ", replay " + us(x.replayed) + ", +" + us(x.added) + "\n";
  }
  return s;
}

/// Measured steps of the same table run side by side (the replicas of a data-parallel run, each
/// a pipeline: mpi::executor::recorded_step(d)) as one document of Chrome trace events: per
/// replica d, its ranks as they ran, then the same ranks in its replay (processes 2pd + r and
/// 2pd + p + r). Times in microseconds, on one clock.
template <table_like Table>
std::string measured_trace(const Table& t, std::span<const measured_step> replicas) {
  std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  const int p = t.ranks();
  for (std::size_t d = 0; d < replicas.size(); ++d) {
    double measured = 0.0, replayed = 0.0;
    const measured_step& m = replicas[d];
    const auto ran = detail::timeline_items(t, detail::measured_timeline(t, m, measured));
    const auto replay =
        detail::timeline_items(t, detail::simulate_timeline(t, detail::costs_of_measured(t, m), replayed));
    const std::string who = replicas.size() > 1 ? "replica " + std::to_string(d) + ", " : std::string();
    const int base = 2 * p * static_cast<int>(d);
    detail::trace_events(
        ran, base, [&](int r) { return who + "rank " + std::to_string(r) + " (measured)"; }, 1e6, s, first);
    detail::trace_events(
        replay, base + p, [&](int r) { return who + "rank " + std::to_string(r) + " (replay)"; }, 1e6, s, first);
  }
  return s + "\n]}\n";
}

/// The measured step as Chrome trace events: process r is rank r as it ran, process p + r the same
/// rank in the replay. Times in microseconds.
template <table_like Table>
std::string measured_trace(const Table& t, const measured_step& m) {
  return measured_trace(t, std::span<const measured_step>(&m, 1));
}

/// The measured step as an SVG timeline: each rank's row as it ran, and below it the same rank in
/// the replay; the comparison's figures below.
template <table_like Table>
std::string measured_svg(const Table& t, const measured_step& m, const svg_options& o = {}) {
  double measured = 0.0, replayed = 0.0;
  const auto ran = detail::timeline_items(t, detail::measured_timeline(t, m, measured));
  const auto replay =
      detail::timeline_items(t, detail::simulate_timeline(t, detail::costs_of_measured(t, m), replayed));
  std::vector<detail::svg::row> rows;
  for (int r = 0; r < t.ranks(); ++r) {
    rows.push_back({"rank " + std::to_string(r), &ran[detail::ix(r)]});
    rows.push_back({"replay " + std::to_string(r), &replay[detail::ix(r)]});
  }
  const step_comparison c = compare_measured(t, m);
  std::vector<std::string> lines;
  std::string text = comparison_text(c, 3);
  for (std::size_t b = 0; b < text.size();) {
    const std::size_t e = std::min(text.find('\n', b), text.size());
    lines.push_back(text.substr(b, e - b));
    b = e + 1;
  }
  svg_options with_title = o;
  const std::string title = detail::svg::title_of(t, o) + ", as it ran (seconds)";
  with_title.title = title;
  return detail::svg::document(title, rows, std::max(measured, replayed), lines, with_title);
}

/// A measured step as CSV, a row per task: rank,position,start,end (seconds; -1 for a task that
/// did not run), after a header line. What `ctpipe compare` reads, with the table it ran.
inline std::string to_csv(const measured_step& m) {
  std::string s = "rank,position,start,end\n";
  char buf[96];
  for (std::size_t r = 0; r < m.ranks.size(); ++r)
    for (std::size_t i = 0; i < m.ranks[r].size(); ++i) {
      std::snprintf(buf, sizeof buf, "%zu,%zu,%.9g,%.9g\n", r, i, m.ranks[r][i].start, m.ranks[r][i].end);
      s += buf;
    }
  return s;
}

/// Reads what to_csv(measured_step) writes: rows in any order, every (rank, position) once, the
/// positions of each rank from 0 without a gap. Throws format_error naming the line at fault.
inline measured_step read_measured_csv(std::istream& in) {
  measured_step m;
  std::string line;
  int number = 0;
  bool header = false;
  constexpr long long max_tasks = 1LL << 26;
  long long rows = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = "measured step: line " + std::to_string(number);
    if (!header) {
      if (line != "rank,position,start,end")
        throw format_error(where + ": the header rank,position,start,end is expected");
      header = true;
      continue;
    }
    long long r = -1, i = -1;
    double start = 0.0, end = 0.0;
    char tail = 0;
    if (std::sscanf(line.c_str(), "%lld,%lld,%lf,%lf%c", &r, &i, &start, &end, &tail) != 4)
      throw format_error(where + ": rank,position,start,end expected, not '" + line.substr(0, 80) + "'");
    if (r < 0 || r >= detail::max_index || i < 0 || i >= detail::max_index || ++rows > max_tasks)
      throw format_error(where + ": rank and position must be from 0 to 2^20");
    if (!std::isfinite(start) || !std::isfinite(end) || (end >= 0.0 && (start < 0.0 || end < start)))
      throw format_error(where + ": start and end must be finite, 0 <= start <= end (or end -1: did not run)");
    if (m.ranks.size() <= static_cast<std::size_t>(r)) m.ranks.resize(static_cast<std::size_t>(r) + 1);
    auto& row = m.ranks[static_cast<std::size_t>(r)];
    if (row.size() <= static_cast<std::size_t>(i))
      row.resize(static_cast<std::size_t>(i) + 1, measured_task{-2.0, -2.0});
    if (row[static_cast<std::size_t>(i)].start != -2.0)
      throw format_error(where + ": rank " + std::to_string(r) + ", position " + std::to_string(i) + " given twice");
    row[static_cast<std::size_t>(i)] = {start, end < 0.0 ? -1.0 : end};
  }
  if (!header) throw format_error("measured step: empty (the header rank,position,start,end is expected)");
  for (std::size_t r = 0; r < m.ranks.size(); ++r)
    for (std::size_t i = 0; i < m.ranks[r].size(); ++i)
      if (m.ranks[r][i].start == -2.0)
        throw format_error("measured step: rank " + std::to_string(r) + ", position " + std::to_string(i) + " missing");
  return m;
}

}  // namespace ctpipe
