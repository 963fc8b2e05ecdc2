// PyTorch pipelining's CSV: one row per rank, one action per cell ("0F0", "0SEND_F0", "1RECV_F0",
// "3B2", "1I4", "1W4", an overlapped pair "(0F7;7B3)OVERLAP_F_B"), an empty cell for idle time; and
// ctpipe's skip messages, which name their far stage ("0SEND_SKIP_F3>2", "2RECV_SKIP_F3<0").
// Writing and reading; a table read back goes through the same verification as a generated one.
#pragma once

#include <algorithm>
#include <cmath>
#include <istream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/format/text.hpp>

namespace ctpipe {

/// Malformed input: names the line (1-based rank row + 1) and the cell (1-based), and what is wrong.
class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The largest stages x microbatches a table read from a file may have (its analysis keeps an index
/// of 8 entries per stage and microbatch), and the largest crossings x microbatches (4 entries each).
inline constexpr long long max_table_cells = 1LL << 22;

/// Writes each rank's program as one row. With `idle_cells`, an empty cell stands for each time
/// quantum (the smallest compute cost) a rank waits before an op, as simulated under `costs`.
template <table_like Table, cost_function Costs = cost_model>
std::string to_csv(const Table& t, const Costs& costs = {}, bool include_comm = true, bool idle_cells = true) {
  double makespan = 0.0;
  const auto tl = detail::simulate_timeline(t, costs, makespan);
  const double q = detail::grid_quantum(t, costs);
  std::string out;
  for (int r = 0; r < t.ranks(); ++r) {
    auto prog = t.program(r);
    std::string row;
    bool first = true;
    double clock = 0.0;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (!include_comm && is_comm(prog[i].op)) continue;
      const double start = tl.start[detail::ix(r)][i];
      if (idle_cells && is_compute(prog[i].op))
        for (long k = std::lround((start - clock) / q); k > 0; --k) {
          row += first ? "" : ",";
          first = false;
        }
      row += first ? "" : ",";
      first = false;
      if (prog[i].overlapped && i + 1 < prog.size()) {  // one cell for the pair F&B
        row += pair_action_string(prog[i], prog[i + 1]);
        clock = tl.end[detail::ix(r)][i];
        ++i;
        continue;
      }
      row += action_string(prog[i]);
      if (is_compute(prog[i].op)) clock = tl.end[detail::ix(r)][i];
    }
    out += row + "\n";
  }
  return out;
}

/// Parses one action string; throws format_error naming the cell.
inline task parse_action(const std::string& cell, int line, int column) {
  auto fail = [&](const std::string& why) {
    return format_error("line " + std::to_string(line) + ", cell " + std::to_string(column) + " '" + cell +
                        "': " + why);
  };
  // A skip message's far stage: after '>' (a send) or '<' (a receive).
  const std::size_t arrow = cell.find_first_of("<>");
  const std::string action = cell.substr(0, arrow);
  std::size_t i = 0;
  while (i < action.size() && action[i] >= '0' && action[i] <= '9') ++i;
  if (i == 0) throw fail("expected a stage number first, as in 0F0 or 1SEND_F0");
  std::size_t j = action.size();
  while (j > i && action[j - 1] >= '0' && action[j - 1] <= '9') --j;
  if (j == action.size()) throw fail("expected a microbatch number last, as in 0F0 or 1SEND_F0");
  op_kind k{};
  if (!parse_op_name(std::string_view(action).substr(i, j - i), k))
    throw fail("unknown op '" + action.substr(i, j - i) +
               "' (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, SEND_SKIP_F, RECV_SKIP_F, SEND_SKIP_B or "
               "RECV_SKIP_B)");
  if (i > 7 || action.size() - j > 7) throw fail("number too large");
  task x{k, std::stoi(action.substr(0, i)), std::stoi(action.substr(j)), -1};
  const char expected = is_send(k) ? '>' : '<';
  if (is_skip(k) != (arrow != std::string::npos) || (is_skip(k) && cell[arrow] != expected))
    throw fail(is_skip(k) ? std::string("a skip message names its far stage after '") + expected + "', as in " +
                                (is_send(k) ? "0SEND_SKIP_F0>2" : "2RECV_SKIP_F0<0")
                          : std::string("only a skip message names a far stage"));
  if (is_skip(k)) {
    const std::string far = cell.substr(arrow + 1);
    if (far.empty() || far.size() > 7 || far.find_first_not_of("0123456789") != std::string::npos)
      throw fail("expected the far stage's number after '" + std::string(1, expected) + "'");
    x.other = std::stoi(far);
  }
  return x;
}

namespace detail {
// "(0F7;7B3)OVERLAP_F_B": the forward (marked overlapped) and the full backward of an overlapped pair.
inline void parse_pair_action(const std::string& cell, int line, int column, task& f, task& b) {
  const std::string suffix = ")OVERLAP_F_B";
  const auto semi = cell.find(';');
  if (cell.size() < suffix.size() + 2 || cell.compare(cell.size() - suffix.size(), suffix.size(), suffix) != 0 ||
      semi == std::string::npos)
    throw format_error("line " + std::to_string(line) + ", cell " + std::to_string(column) + " '" + cell +
                       "': expected an overlapped pair as in (0F7;7B3)OVERLAP_F_B");
  f = parse_action(cell.substr(1, semi - 1), line, column);
  b = parse_action(cell.substr(semi + 1, cell.size() - suffix.size() - semi - 1), line, column);
  if (f.op != op_kind::forward || b.op != op_kind::backward)
    throw format_error("line " + std::to_string(line) + ", cell " + std::to_string(column) + " '" + cell +
                       "': an overlapped pair is a forward F then a full backward B");
  f.overlapped = true;
}
}  // namespace detail

/// Reads a CSV table (compute ops only, or with comm ops). Stage placement is where each stage's
/// ops appear first; stages and microbatches are counted from the largest ids. A table with no
/// comm ops is lowered; one with comm ops is taken as it is (peers follow from the placement).
inline dynamic_table read_csv(std::istream& in) {
  std::vector<std::vector<task>> rows;
  std::string line;
  int line_no = 0;
  int stages = 0, microbatches = 0;
  bool has_comm = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<task> row;
    std::string cell;
    std::stringstream ss(line);
    int column = 0;
    while (std::getline(ss, cell, ',')) {
      ++column;
      const auto b = cell.find_first_not_of(" \t"), e = cell.find_last_not_of(" \t");
      cell = b == std::string::npos ? std::string() : cell.substr(b, e - b + 1);
      if (cell.empty()) continue;  // idle
      task halves[2]{};
      int count = 1;
      if (cell[0] == '(') {
        detail::parse_pair_action(cell, line_no, column, halves[0], halves[1]);
        count = 2;
      } else {
        halves[0] = parse_action(cell, line_no, column);
      }
      for (int h = 0; h < count; ++h) {
        const task& x = halves[h];
        if (x.stage >= detail::max_index || x.microbatch >= detail::max_index || x.other >= detail::max_index)
          throw format_error("line " + std::to_string(line_no) + ", cell " + std::to_string(column) +
                             ": stage or microbatch too large");
        stages = std::max({stages, x.stage + 1, x.other + 1});
        microbatches = std::max(microbatches, x.microbatch + 1);
        has_comm = has_comm || is_comm(x.op);
        row.push_back(x);
      }
    }
    rows.push_back(std::move(row));
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  if (rows.empty()) throw format_error("no ranks: the CSV has no rows with actions");
  if (static_cast<long long>(stages) * microbatches > max_table_cells)
    throw format_error("stages x microbatches (" + std::to_string(static_cast<long long>(stages) * microbatches) +
                       ") is too large: at most " + std::to_string(max_table_cells));
  const int ranks = static_cast<int>(rows.size());
  std::vector<int> placement(detail::ix(stages), -1);
  for (int r = 0; r < ranks; ++r)
    for (const task& x : rows[detail::ix(r)])
      if (placement[detail::ix(x.stage)] < 0) placement[detail::ix(x.stage)] = r;
  for (int s = 0; s < stages; ++s)
    if (placement[detail::ix(s)] < 0)
      throw format_error("stage " + std::to_string(s) +
                         " has no ops on any rank (stages are numbered from 0 up to the largest id)");
  // Two directions (DualPipe) where the first half of the microbatches keeps to the first half of
  // the stages and the second half to the second: in a one-direction table microbatch 0 visits
  // every stage, so no valid one reads as two.
  bool two_directions = stages % 2 == 0 && microbatches % 2 == 0;
  for (const auto& row : rows)
    for (const task& x : row)
      two_directions = two_directions && (x.stage < stages / 2) == (x.microbatch < microbatches / 2);
  const int directions = two_directions ? 2 : 1;
  dynamic_table t(custom_schedule(ranks, microbatches, 1, directions), std::move(placement));
  // Forward only where no row holds an op of the backward (a training table without one would not
  // verify, so no valid one reads as forward only).
  bool backward = false;
  for (const auto& row : rows)
    for (const task& x : row) backward = backward || detail::backward_op[static_cast<int>(x.op)];
  t.params.forward_only = !backward;
  // The crossings are those the skip messages name (in chain positions, each pair once, in order;
  // their bytes are not in the file).
  const int length = stages / directions;
  for (int r = 0; r < ranks; ++r)
    for (task x : rows[detail::ix(r)]) {
      if (is_comm(x.op)) {
        const int nb = is_skip(x.op) ? x.other : x.stage + detail::partner_delta[static_cast<int>(x.op)];
        x.peer = nb >= 0 && nb < stages ? t.rank_of(nb) : -1;
      }
      if (is_skip(x.op)) {
        const bool producer = detail::skip_at_producer[static_cast<int>(x.op)];
        const crossing c{(producer ? x.stage : x.other) % length, (producer ? x.other : x.stage) % length, 0};
        const auto at = std::lower_bound(
            t.crossings.begin(), t.crossings.end(), c,
            [](const crossing& a, const crossing& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
        if (at == t.crossings.end() || !(*at == c)) t.crossings.insert(at, c);
      }
      t.push(r, x);
    }
  if (static_cast<long long>(t.crossings.size()) * microbatches > max_table_cells)
    throw format_error("crossings x microbatches (" +
                       std::to_string(static_cast<long long>(t.crossings.size()) * microbatches) +
                       ") is too large: at most " + std::to_string(max_table_cells));
  if (!has_comm) return lower(t);
  return t;
}

}  // namespace ctpipe
