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

TEST_CASE("a step of microbatches of different lengths against the cost model of their extents") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 4));
  const std::vector<int> extents{1, 4, 2, 3};
  const std::vector<double> factors = ctpipe::extent_factors(extents, 4);
  CHECK(factors == std::vector<double>{0.25, 1.0, 0.5, 0.75});
  // Messages that grow with the tokens too (scale_messages).
  const ctpipe::microbatch_scaled cost{ctpipe::cost_model{.forward = 1, .backward = 2, .comm = 0.5},
                                       std::span<const double>(factors), true};
  // "Measured": what the model says a step of these lengths takes.
  ctpipe::measured_step m;
  for (int r = 0; r < t.ranks(); ++r) m.ranks.emplace_back(t.program(r).size());
  const auto ran = ctpipe::simulate(t, cost, [&](int r, int i, double s, double e) {
    m.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {s, e};
  });
  const auto with = ctpipe::compare_measured(t, m, cost);
  CHECK(with.predicted == doctest::Approx(ran.makespan));
  REQUIRE(with.predicted_busy.size() == 2);
  CHECK(with.predicted_busy[0] == doctest::Approx(3.0 * (0.25 + 1.0 + 0.5 + 0.75)));
  // Each message priced by its microbatch's length, the replay explains every wait.
  CHECK(with.replayed == doctest::Approx(with.measured));
  for (const auto& x : with.late) CHECK(x.added < 1e-9);
  // Without the model the replay's messages are free: the receives ran late by their messages.
  const auto without = ctpipe::compare_measured(t, m);
  CHECK(without.predicted == 0.0);
  CHECK(without.replayed < without.measured);
  CHECK_FALSE(without.late.empty());
  // Attention's share grows with the square of the length.
  CHECK(ctpipe::extent_factors(extents, 4, 1.0)[0] == 0.0625);
  CHECK(ctpipe::extent_factors(extents, 4, 0.5)[2] == doctest::Approx(0.5 * 0.5 + 0.5 * 0.25));
  CHECK_THROWS_AS(ctpipe::extent_factors(extents, 0), std::invalid_argument);
  CHECK_THROWS_AS(ctpipe::extent_factors(extents, 4, 1.5), std::invalid_argument);
}

TEST_CASE("comparison_text says what the cost model predicted, where one was given") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 2));
  ctpipe::measured_step m;
  for (int r = 0; r < t.ranks(); ++r) m.ranks.emplace_back(t.program(r).size());
  const ctpipe::cost_model cost{.forward = 1e-6, .backward = 2e-6};
  ctpipe::simulate(t, cost, [&](int r, int i, double s, double e) {
    m.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {s, e};
  });
  const std::string with = ctpipe::comparison_text(ctpipe::compare_measured(t, m, cost));
  CHECK(with.find("the cost model predicted 9.0 us") != std::string::npos);
  CHECK(with.find("rank 1: busy 6.0 us") != std::string::npos);
  CHECK(with.find("busy 6.0 us predicted") != std::string::npos);
  CHECK(ctpipe::comparison_text(ctpipe::compare_measured(t, m)).find("predicted") == std::string::npos);
}

namespace {
// Stage s's F takes s + 1, its backward 2(s + 1) (B, or I and W at s + 1 each), messages 0.25.
struct by_stage {
  double comm = 0.25;
  double operator()(const ctpipe::task& x) const {
    const double unit = x.stage + 1.0;
    return x.op == ctpipe::op_kind::forward ? unit : x.op == ctpipe::op_kind::backward ? 2 * unit : unit;
  }
};
template <class Table>
ctpipe::measured_step measured_by_stage(const Table& t) {
  ctpipe::measured_step m;
  for (int r = 0; r < t.ranks(); ++r) m.ranks.emplace_back(t.program(r).size());
  ctpipe::simulate(t, by_stage{}, [&](int r, int i, double s, double e) {
    m.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = {s, e};
  });
  return m;
}
}  // namespace

TEST_CASE("stage_times: each stage's forward and backward per microbatch, as a step measured them") {
  // 1F1B (B whole), ZB-H1 (I and W apart) and interleaved (two stages a rank).
  const auto one = ctpipe::generate(ctpipe::one_f_one_b(3, 4));
  const auto zb = ctpipe::generate(ctpipe::zb_h1(2, 4));
  const auto inter = ctpipe::generate(ctpipe::interleaved(2, 4, 2));
  for (const auto* t : {&one, &zb, &inter}) {
    const std::vector<ctpipe::stage_time> s = ctpipe::stage_times(*t, measured_by_stage(*t));
    REQUIRE(static_cast<int>(s.size()) == t->stages());
    for (std::size_t k = 0; k < s.size(); ++k) {
      CHECK(s[k].forward == doctest::Approx(k + 1.0));
      CHECK(s[k].backward == doctest::Approx(2 * (k + 1.0)));
    }
  }
  // A compute task that did not run, a step of another shape, an overlapped pair: refused.
  auto m = measured_by_stage(one);
  REQUIRE(one.program(2)[1].op == ctpipe::op_kind::forward);  // (after its receive)
  m.ranks[2][1] = {};
  CHECK_THROWS_WITH_AS(ctpipe::stage_times(one, m), "stage times: rank 2, position 1: a compute task that did not run",
                       std::invalid_argument);
  m.ranks[2].pop_back();
  CHECK_THROWS_WITH_AS(ctpipe::stage_times(one, m), doctest::Contains("measured step: rank 2 has"),
                       std::invalid_argument);
  const auto pairs = ctpipe::generate(ctpipe::dualpipe_v(2, 4));
  CHECK_THROWS_WITH_AS(ctpipe::stage_times(pairs, measured_by_stage(pairs)), doctest::Contains("overlaps a pair F&B"),
                       std::invalid_argument);
}
