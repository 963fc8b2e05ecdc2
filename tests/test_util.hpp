#pragma once
#include <ctpipe/ctpipe.hpp>

#include <sstream>
#include <string>

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
}  // namespace test
