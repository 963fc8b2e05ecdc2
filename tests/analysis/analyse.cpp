// Analysis under cost models, with split backward, communication latency, per-stage costs.
#include <doctest/doctest.h>

#include "support/test_util.hpp"

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
