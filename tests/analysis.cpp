// Analysis under cost models, with split backward, communication latency, per-stage costs.
#include <doctest/doctest.h>

#include "test_util.hpp"

TEST_CASE("communication latency adds to every cross-rank hop") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(4, 8));
  const auto r = ctpipe::analyse(t, ctpipe::cost_model{.forward = 1, .backward = 2, .comm = 0.5});
  // Fill and drain each cross 3 hops forward and 3 back on the critical path.
  CHECK(r.makespan >= 33.0 + 6 * 0.5);
  const auto slower = ctpipe::analyse(t, ctpipe::cost_model{.forward = 1, .backward = 2, .comm = 1.0});
  CHECK(slower.makespan > r.makespan);
  CHECK(slower.busy == r.busy);
}

TEST_CASE("per-stage costs: the slowest stage sets the pace") {
  const auto t = ctpipe::generate(ctpipe::gpipe(2, 4));
  ctpipe::stage_costs<2> c{};
  c.forward = {1.0, 3.0};
  c.backward = {2.0, 6.0};
  const auto r = ctpipe::analyse(t, c);
  // Stage 1 is busy 4*(3+6) = 36 from time 1 (first forward of stage 0) on; stage 0's last B waits for it.
  CHECK(r.busy[1] == 36.0);
  CHECK(r.makespan == 1.0 + 36.0 + 2.0);
  CHECK(r.bubble_fraction == doctest::Approx(1.0 - (12.0 + 36.0) / (2 * 39.0)));
}

TEST_CASE("split backward: activations live until W, gradients until I") {
  // One rank, two stages, I and W split; W deferred to the end (the zero-bubble idea).
  const auto t = test::from_csv("0F0,1F0,0F1,1F1,1I0,0I0,1I1,0I1,1W0,0W0,1W1,0W1\n");
  REQUIRE(ctpipe::verify(t).ok());
  const auto r = ctpipe::analyse(t, ctpipe::cost_model{.forward = 1, .backward_input = 1, .backward_weight = 1});
  CHECK(r.peak_live[0] == 4);
  CHECK(r.makespan == 12.0);
  CHECK(r.bubble_fraction == 0.0);
}

TEST_CASE("slots are reused once freed") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 6));
  std::vector<int> act_slots;
  const auto plan = ctpipe::plan_memory(t, [&](int rank, int, ctpipe::slot_pool pool, int slot) {
    if (rank == 0 && pool == ctpipe::slot_pool::activation) act_slots.push_back(slot);
  });
  CHECK(plan.activation_slots[0] == 2);
  CHECK(plan.gradient_slots[0] == 1);
  CHECK(plan.gradient_slots[1] == 0);
  REQUIRE(act_slots.size() == 6);
  for (int s : act_slots) CHECK((s == 0 || s == 1));
}

TEST_CASE("channel capacity is what the sender can run ahead, and 0 where nothing is sent") {
  const auto g = ctpipe::analyse(ctpipe::generate(ctpipe::gpipe(3, 5)));
  CHECK(g.capacity(0, 1) == 5);  // GPipe: all forwards can be in flight
  CHECK(g.capacity(1, 0) == 5);
  CHECK(g.capacity(0, 2) == 0);
  const auto n = ctpipe::analyse(ctpipe::generate(ctpipe::naive(3, 5)));
  CHECK(n.capacity(0, 1) == 1);  // naive: one microbatch at a time
  CHECK(n.capacity(2, 1) == 1);
}

TEST_CASE("simulate reports every task's start and end in program order") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 2));
  std::vector<std::vector<double>> ends(2);
  const auto timing = ctpipe::simulate(t, ctpipe::cost_model{}, [&](int r, int i, double s, double e) {
    CHECK(e >= s);
    CHECK(static_cast<std::size_t>(i) == ends[static_cast<std::size_t>(r)].size());
    ends[static_cast<std::size_t>(r)].push_back(e);
  });
  CHECK(ends[0].size() == t.program(0).size());
  CHECK(timing.makespan == ends[0].back());
}

TEST_CASE("uneven work: microbatch_scaled multiplies each microbatch's ops") {
  const auto t = ctpipe::generate(ctpipe::gpipe(1, 3));
  const std::vector<double> factors{1.0, 2.0};  // microbatch 2: past the list, 1
  const ctpipe::microbatch_scaled scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, factors};
  CHECK(scaled.of(0) == 1.0);
  CHECK(scaled.of(1) == 2.0);
  CHECK(scaled.of(2) == 1.0);
  CHECK(ctpipe::analyse(t, scaled).makespan == 3.0 * (1 + 2 + 1));
  // Messages keep their time unless asked; an overlapped pair keeps its ratio to its parts.
  const ctpipe::microbatch_scaled msgs{ctpipe::cost_model{.comm = 0.5, .overlap = 1.5}, factors, true};
  const ctpipe::task f{ctpipe::op_kind::forward, 0, 1}, b{ctpipe::op_kind::backward, 0, 1};
  const ctpipe::task send{ctpipe::op_kind::send_forward, 0, 1, 1};
  CHECK(msgs.message(send) == 1.0);
  CHECK(scaled.message(send) == 0.0);
  CHECK(msgs.pair(f, b) == doctest::Approx(2.0 * 1.5));
  // Two ranks: the heavy microbatch delays the others behind it.
  const auto two = ctpipe::generate(ctpipe::one_f_one_b(2, 2));
  const std::vector<double> heavy{1.0, 3.0};
  CHECK(ctpipe::analyse(two, ctpipe::microbatch_scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, heavy})
            .makespan == 19.0);
}

TEST_CASE("uneven work at compile time") {
  static constexpr std::array<double, 4> factors{1.0, 0.5, 0.5, 2.0};
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
  constexpr auto even = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1, .backward = 2});
  constexpr auto uneven =
      ctpipe::analyse(table, ctpipe::microbatch_scaled{ctpipe::cost_model{.forward = 1, .backward = 2}, factors});
  // The same total work (factors sum to 4), a longer step: the heavy last microbatch drains alone.
  static_assert(uneven.busy[0] == even.busy[0]);
  static_assert(uneven.makespan > even.makespan);
  CHECK(uneven.makespan > even.makespan);
}

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
