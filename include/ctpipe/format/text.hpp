// Text formats of a table: action strings, the per-rank timeline grid, and a figures summary.
// Run-time only (std::string); knows nothing of executors.
#pragma once

#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/detail/index.hpp>  // ix

namespace ctpipe {

/// PyTorch pipelining's action string: "0F0", "1SEND_F0", "3RECV_B2", "1I4"; a skip message adds
/// the stage at its other end, after '>' for a send and '<' for a receive: "0SEND_SKIP_F3>2",
/// "2RECV_SKIP_F3<0".
inline std::string action_string(const task& t) {
  // (Appended in order: g++ 12 at -O3 reports a false -Wrestrict inside `"<" + std::string`.)
  std::string s = std::to_string(t.stage);
  s += op_name(t.op);
  s += std::to_string(t.microbatch);
  if (is_skip(t.op)) {
    s += is_send(t.op) ? '>' : '<';
    s += std::to_string(t.other);
  }
  return s;
}

/// PyTorch pipelining's action string of an overlapped pair F&B: "(0F7;7B3)OVERLAP_F_B".
inline std::string pair_action_string(const task& f, const task& b) {
  // (Appended in order, as action_string.)
  std::string s = "(";
  s += action_string(f);
  s += ';';
  s += action_string(b);
  s += ")OVERLAP_F_B";
  return s;
}

namespace detail {
// The label of compute op i of a program in the grid: "0F7&7B3" for an overlapped pair (its second
// half gets none: ""), the action string otherwise.
inline std::string grid_label(std::span<const task> prog, std::size_t i) {
  if (i > 0 && prog[i - 1].overlapped) return "";
  if (prog[i].overlapped && i + 1 < prog.size()) return action_string(prog[i]) + "&" + action_string(prog[i + 1]);
  return action_string(prog[i]);
}
}  // namespace detail

namespace detail {
// A number as the formats print it: integers without a fraction, others with up to 4 decimals.
inline std::string format_number(double v) {
  char buf[64];
  if (std::fabs(v - std::round(v)) < 1e-9) {
    std::snprintf(buf, sizeof buf, "%.1f", std::round(v));
  } else {
    std::snprintf(buf, sizeof buf, "%.4f", v);
    std::string s(buf);
    while (s.back() == '0') s.pop_back();
    return s;
  }
  return buf;
}
}  // namespace detail

namespace detail {
// Start time of every task, per rank and position, from the simulation.
struct timeline {
  std::vector<std::vector<double>> start, end;
};
template <table_like Table, cost_function Costs>
timeline simulate_timeline(const Table& t, const Costs& costs, double& makespan) {
  timeline tl;
  for (int r = 0; r < t.ranks(); ++r) {
    tl.start.emplace_back(t.program(r).size(), 0.0);
    tl.end.emplace_back(t.program(r).size(), 0.0);
  }
  makespan = simulate(t, costs, [&](int r, int i, double s, double e) {
               tl.start[detail::ix(r)][detail::ix(i)] = s;
               tl.end[detail::ix(r)][detail::ix(i)] = e;
             }).makespan;
  return tl;
}
// What a picture of the timeline draws: per rank, each compute op as one item (an overlapped pair
// F&B as one item of its own), and each comm op as a point in time. Shared by the SVG and the trace.
struct timeline_item {
  task op{};          // the compute op (for a pair: its F)
  task second{};      // a pair's B
  bool pair = false;  // an overlapped pair F&B
  bool comm = false;  // a send or receive (a point in time: start == end)
  double start = 0.0, end = 0.0;
};
// The items of `t` with the start and end times of `tl` (simulated, or measured).
template <table_like Table>
std::vector<std::vector<timeline_item>> timeline_items(const Table& t, const timeline& tl) {
  std::vector<std::vector<timeline_item>> rows(detail::ix(t.ranks()));
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const auto ur = detail::ix(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      timeline_item x{prog[i], {}, false, is_comm(prog[i].op), tl.start[ur][i], tl.end[ur][i]};
      if (prog[i].overlapped && i + 1 < prog.size() && is_compute(prog[i + 1].op)) {
        x.pair = true;
        x.second = prog[i + 1];
        ++i;
      }
      rows[ur].push_back(x);
    }
  }
  return rows;
}
template <table_like Table, cost_function Costs>
std::vector<std::vector<timeline_item>> timeline_items(const Table& t, const Costs& costs, double& makespan) {
  return timeline_items(t, simulate_timeline(t, costs, makespan));
}
// An item's name in the pictures: "F s2 mb5", or "F s0 mb7 & B s7 mb3" for a pair.
inline std::string item_name(const timeline_item& x) {
  auto one = [](const task& t) {
    return std::string(op_name(t.op)) + " s" + std::to_string(t.stage) + " mb" + std::to_string(t.microbatch);
  };
  return x.pair ? one(x.op) + " & " + one(x.second) : one(x.op);
}
// The time one grid column stands for: the smallest compute cost in the table.
template <table_like Table, cost_function Costs>
double grid_quantum(const Table& t, const Costs& costs) {
  double q = 0.0;
  for (int r = 0; r < t.ranks(); ++r)
    for (const task& x : t.program(r))
      if (is_compute(x.op)) {
        const double d = static_cast<double>(costs(x));
        if (d > 0.0 && (q == 0.0 || d < q)) q = d;
      }
  return q > 0.0 ? q : 1.0;
}
}  // namespace detail

/// The per-rank timeline, one column per time quantum (the smallest compute cost): each compute op
/// is its action string followed by '-' over the time it runs; '.' is idle time.
template <table_like Table, cost_function Costs = cost_model>
std::string timeline_grid(const Table& t, const Costs& costs = {}) {
  double makespan = 0.0;
  const auto tl = detail::simulate_timeline(t, costs, makespan);
  const double q = detail::grid_quantum(t, costs);
  std::size_t width = 2;  // characters per column: the longest label plus a space
  for (int r = 0; r < t.ranks(); ++r) {
    auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (is_compute(prog[i].op)) width = std::max(width, detail::grid_label(prog, i).size() + 1);
  }
  // time quanta: a rounding, not an index
  const auto cols = static_cast<std::size_t>(std::ceil(makespan / q - 1e-9));
  std::string out;
  const std::string rank_w = std::to_string(t.ranks() - 1);
  for (int r = 0; r < t.ranks(); ++r) {
    std::string line(cols * width, ' ');
    for (std::size_t c = 0; c < cols; ++c) line[c * width] = '.';
    auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (!is_compute(prog[i].op)) continue;
      const std::string label = detail::grid_label(prog, i);
      if (label.empty()) continue;  // the second half of an overlapped pair: drawn with the first
      const auto c0 = detail::ix(std::llround(tl.start[detail::ix(r)][i] / q));
      const auto c1 = detail::ix(std::llround(tl.end[detail::ix(r)][i] / q));
      for (std::size_t k = c0 * width; k < std::min(c1 * width, line.size()); ++k) line[k] = '-';
      for (std::size_t k = 0; k < label.size() && c0 * width + k < line.size(); ++k) line[c0 * width + k] = label[k];
      if (c1 * width <= line.size() && c1 > c0) line[c1 * width - 1] = ' ';
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::string name(1, 'r');  // not "r" + to_string(r): g++ 12 -O2 warns falsely (-Wrestrict, PR 105651)
    name += std::to_string(r);
    name.resize(rank_w.size() + 2, ' ');
    out += name + "| " + line + "\n";
  }
  return out;
}

/// Makespan, bubble fraction, per-rank busy and idle time, peak live activations, slots (for what
/// skip messages bring too, where there is any) and the capacity of every channel that carries
/// messages. `time_unit` names the unit of the cost model's
/// figures ("us", "FLOP", ...): where given, every time figure says it; activations are counted in
/// microbatches held per stage, slots and capacities in tensors.
template <std::size_t R>
std::string figures_text(const report<R>& rep, std::string_view time_unit = {}) {
  const std::string unit = time_unit.empty() ? std::string() : " (" + std::string(time_unit) + ")";
  std::string s = "makespan" + unit + " " + detail::format_number(rep.makespan) + "\n";
  s += "bubble fraction " + detail::format_number(std::round(rep.bubble_fraction * 10000.0) / 10000.0) + "\n";
  auto row = [&](const std::string& name, const auto& v) {
    s += name;
    for (auto x : v) s += " " + (std::is_floating_point_v<decltype(x)> ? detail::format_number(x) : std::to_string(x));
    s += "\n";
  };
  s += "bubble rate " + detail::format_number(std::round(rep.bubble_rate * 10000.0) / 10000.0) + "\n";
  row("busy per rank" + unit, rep.busy);
  row("idle per rank" + unit, rep.idle);
  row("span per rank" + unit, rep.span);
  row("bubble per rank" + unit, rep.bubble);
  row("peak live activations per rank", rep.peak_live);
  row("  awaiting I at the peak", rep.peak_awaiting_input);
  row("  awaiting W at the peak", rep.peak_awaiting_weight);
  row("activation slots per rank", rep.activation_slots);
  row("gradient slots per rank", rep.gradient_slots);
  // What skip messages bring (a table with skip connections across ranks has some).
  bool skips = false;
  for (std::size_t r = 0; r < rep.skip_value_slots.size(); ++r)
    skips = skips || rep.skip_value_slots[r] > 0 || rep.skip_gradient_slots[r] > 0;
  if (skips) {
    row("skip value slots per rank", rep.skip_value_slots);
    row("skip gradient slots per rank", rep.skip_gradient_slots);
  }
  const int p = static_cast<int>(rep.peak_live.size());
  std::string ch;
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b)
      if (rep.capacity(a, b) > 0)
        ch += " " + std::to_string(a) + "->" + std::to_string(b) + ":" + std::to_string(rep.capacity(a, b));
  s += "channel capacity" + (ch.empty() ? std::string(" none") : ch) + "\n";
  return s;
}

}  // namespace ctpipe
