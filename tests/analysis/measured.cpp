// A measured step against its replay (compare_measured, comparison_text).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_util.hpp"

TEST_CASE("a measured step against its replay: the waits the table does not explain") {
  // "Measured": 1F1B on 2 ranks where every message takes 0.5; the replay knows only the task times.
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 3));
  ctpipe::measured_step m;
  for (int r = 0; r < t.ranks(); ++r) m.ranks.emplace_back(t.program(r).size());
  const auto ran = ctpipe::simulate(t, ctpipe::cost_model{.forward = 1, .backward = 2, .comm = 0.5},
                                    [&](int r, int i, double s, double e) {
                                      m.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {s, e};
                                    });
  const auto c = ctpipe::compare_measured(t, m);
  CHECK(c.measured == ran.makespan);
  CHECK(c.replayed == ctpipe::analyse(t, ctpipe::cost_model{.forward = 1, .backward = 2}).makespan);
  CHECK(c.busy == std::vector<double>{9.0, 9.0});
  REQUIRE_FALSE(c.late.empty());
  // Most added: rank 0's first backward, after a round trip (two messages) its replay does not
  // have; no task added more than that.
  CHECK(c.late.front().added == doctest::Approx(1.0));
  CHECK(c.late.front().rank == 0);
  CHECK(c.late.front().op.op == ctpipe::op_kind::backward);
  for (const auto& x : c.late) CHECK(x.added <= 1.0 + 1e-12);
  // Rank 1's first forward waited one message.
  bool rank1_f0 = false;
  for (const auto& x : c.late)
    rank1_f0 = rank1_f0 || (x.rank == 1 && x.op.op == ctpipe::op_kind::forward && x.op.microbatch == 0);
  CHECK(rank1_f0);
  const std::string text = ctpipe::comparison_text(c, 100);
  CHECK(text.find("ran late") != std::string::npos);
  CHECK(text.find("rank 1, stage 1, microbatch 0, op F") != std::string::npos);
  // A record of another shape is refused with the rank at fault.
  m.ranks[1].pop_back();
  CHECK_THROWS_WITH_AS(ctpipe::compare_measured(t, m), doctest::Contains("measured step: rank 1 has"),
                       std::invalid_argument);
}
