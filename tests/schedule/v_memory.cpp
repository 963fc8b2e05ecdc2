// V-Min and V-Half (controllable memory): each rank's order against the authors' scheduler
// (tests/data/v_memory_orders.txt: p <= 8, every case there, and p = 4, m = 8 pinned below), the
// figures of that file (per-rank span at F = I = W, peak activations). The sweep in
// analysis/sweep.cpp proves every table for p <= 16, m <= 64 and checks its peak by the authors'
// formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_util.hpp"

namespace {

// "<kind>.<microbatch> ..." as the data file writes a rank's order (kinds: F0 F1 I1 I0 W1 W0, chunk
// 0 = stage r, chunk 1 = stage 2p-1-r).
std::string reference_notation(const ctpipe::dynamic_table& t, int r) {
  std::string out;
  for (const ctpipe::task& x : t.program(r)) {
    const bool upper = x.stage != r;
    int kind = 0;
    if (x.op == ctpipe::op_kind::forward) kind = upper ? 1 : 0;
    if (x.op == ctpipe::op_kind::backward_input) kind = upper ? 2 : 3;
    if (x.op == ctpipe::op_kind::backward_weight) kind = upper ? 4 : 5;
    out += (out.empty() ? "" : " ") + std::to_string(kind) + "." + std::to_string(x.microbatch);
  }
  return out;
}

// The compute ops alone, or (lowered) the table with its messages.
ctpipe::dynamic_table v_table(const std::string& name, int p, int m, bool lowered) {
  if (lowered) return name == "v_min" ? ctpipe::generate(ctpipe::v_min(p, m)) : ctpipe::generate(ctpipe::v_half(p, m));
  return name == "v_min" ? ctpipe::generate_compute(ctpipe::v_min(p, m))
                         : ctpipe::generate_compute(ctpipe::v_half(p, m));
}

}  // namespace

TEST_CASE("V-Min and V-Half p=4 m=8 match the reference orders") {
  const auto mn = ctpipe::generate_compute(ctpipe::v_min(4, 8));
  CHECK(test::compute_order(mn, 0, true) ==
        "0F0 0F1 0F2 7F0 7I0 7W0 7F1 7I1 7W1 0I0 0W0 0F3 7F2 7I2 0I1 7W2 0W1 0F4 7F3 7I3 0I2 7W3 0W2 0F5 7F4 7I4 "
        "0I3 7W4 0W3 0F6 7F5 7I5 0I4 7W5 0W4 0F7 7F6 7I6 0I5 7W6 0W5 7F7 7I7 0I6 7W7 0W6 0I7 0W7");
  CHECK(test::compute_order(mn, 3, true) ==
        "3F0 4F0 3F1 4F1 4I0 3I0 4W0 3W0 3F2 4F2 4I1 3I1 4W1 3W1 3F3 4F3 4I2 3I2 4W2 3W2 3F4 4F4 4I3 3I3 4W3 3W3 "
        "3F5 4F5 4I4 3I4 4W4 3W4 3F6 4F6 4I5 3I5 4W5 3W5 3F7 4F7 4I6 3I6 4W6 3W6 4I7 3I7 4W7 3W7");
  const auto hf = ctpipe::generate_compute(ctpipe::v_half(4, 8));
  CHECK(test::compute_order(hf, 0, true) ==
        "0F0 0F1 0F2 0F3 0F4 7F0 7I0 7W0 7F1 7I1 7W1 7F2 0I0 7I2 7W2 7F3 0W0 0F5 0I1 7I3 7W3 7F4 0W1 0F6 0I2 7I4 "
        "7W4 7F5 0W2 0F7 0I3 7I5 7W5 7F6 7I6 7W6 0I4 0W3 0W4 7F7 7I7 0I5 7W7 0I6 0W5 0W6 0I7 0W7");
  CHECK(test::compute_order(hf, 3, true) ==
        "3F0 4F0 3F1 4F1 3F2 4F2 4I0 4W0 3I0 3W0 3F3 4F3 4I1 4W1 3I1 3W1 3F4 4F4 4I2 4W2 3I2 3W2 3F5 4F5 4I3 4W3 "
        "3I3 3F6 3W3 4F6 4I4 3I4 4W4 3F7 3W4 4F7 4I5 3I5 4I6 3I6 4W5 4W6 4I7 3I7 4W7 3W5 3W6 3W7");
}

TEST_CASE("V-Min and V-Half equal the authors' scheduler on every case of tests/data/v_memory_orders.txt") {
  std::ifstream in(CTPIPE_TEST_SOURCE_DIR "/tests/data/v_memory_orders.txt");
  REQUIRE(in);
  std::string line;
  int orders = 0, figures = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, rest;
    int p = 0, m = 0;
    ls >> name >> p >> m >> rest;
    const auto t = v_table(name, p, m, rest == "figures:");
    std::string tail;
    std::getline(ls >> std::ws, tail);
    if (rest == "figures:") {  // makespan <slots> bubble_rate <r> peak <n>
      std::istringstream fs(tail);
      std::string word;
      double span = 0, rate = 0;
      int peak = 0;
      fs >> word >> span >> word >> rate >> word >> peak;
      const auto r = ctpipe::analyse(
          t, ctpipe::cost_model{.forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1, .comm = 0});
      CHECK_MESSAGE(r.max_span() == span, name, " p=", p, " m=", m);
      CHECK_MESSAGE(r.bubble_rate == doctest::Approx(rate).epsilon(1e-5), name, " p=", p, " m=", m);
      CHECK_MESSAGE(*std::max_element(r.peak_live.begin(), r.peak_live.end()) == peak, name, " p=", p, " m=", m);
      ++figures;
      continue;
    }
    const int rank = std::stoi(rest);
    CHECK_MESSAGE(reference_notation(t, rank) == tail, name, " p=", p, " m=", m, " rank ", rank);
    ++orders;
  }
  CHECK(orders == 2 * (2 + 3 + 3 + 4 + 5 + 6 + 6 + 8));
  CHECK(figures == 16);
}
