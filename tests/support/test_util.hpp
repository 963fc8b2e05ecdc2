#pragma once
#include <ctpipe/ctpipe.hpp>

#include <sstream>
#include <string>
#include <utility>

namespace test {
// A rank's compute ops as "stage op mb" words, e.g. "0F0 4F0 4B0"; an overlapped pair as "(0F7&7B3)".
template <class Table>
std::string compute_order(const Table& t, int r, bool with_stage) {
  std::string s;
  bool in_pair = false;
  for (const auto& x : t.program(r)) {
    if (!ctpipe::is_compute(x.op)) continue;
    if (!s.empty() && !in_pair) s += ' ';
    if (x.overlapped) s += '(';
    s += (with_stage ? std::to_string(x.stage) : std::string()) + std::string(ctpipe::op_name(x.op)) +
         std::to_string(x.microbatch);
    if (in_pair) s += ')';
    if (x.overlapped) s += '&';
    in_pair = x.overlapped;
  }
  return s;
}
inline ctpipe::dynamic_table from_csv(const std::string& csv) {
  std::istringstream in(csv);
  return ctpipe::read_csv(in);
}
// Compute ops, counting an overlapped pair once, and comm ops, of a table.
inline std::pair<int, int> drawn_ops(const ctpipe::dynamic_table& t) {
  int compute = 0, comm = 0;
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (ctpipe::is_comm(prog[i].op))
        ++comm;
      else if (!(i > 0 && prog[i - 1].overlapped))
        ++compute;
    }
  }
  return {compute, comm};
}
}  // namespace test
