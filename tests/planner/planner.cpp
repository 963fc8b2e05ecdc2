// The planner: its predictions worked by hand, its rules, and its search against a brute force.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "support/test_util.hpp"

namespace {

using ctpipe::layer_profile;
using ctpipe::plan_choice;
using ctpipe::plan_request;
using ctpipe::planned_schedule;

// Every plan of the request's space, formed here without the planner's enumeration: ranks dividing
// the devices, every schedule, chunks 1 (2 for the V schedules, 2..max for the chunked ones),
// microbatches dividing the replica's batch, recomputation where allowed; those whose rules hold.
std::vector<plan_choice> every_plan(const plan_request& q) {
  std::vector<plan_choice> out;
  for (int p = 1; p <= q.cluster.devices; ++p)
    for (int k = 0; k < ctpipe::planned_schedule_count; ++k)
      for (int v = 1; v <= 8; ++v)
        for (int m = 1; m <= q.max_microbatches; ++m)
          for (int rc = 0; rc < 2; ++rc) {
            const plan_choice c{static_cast<planned_schedule>(k), p, q.cluster.devices / p, m, v, rc == 1};
            if (!q.schedules.has(c.schedule) || (rc == 1 && !q.recompute)) continue;
            if (ctpipe::takes_chunks(c.schedule) && (v < 2 || v > q.max_chunks)) continue;
            if (ctpipe::check_choice(q, c) != ctpipe::plan_rule::ok || !ctpipe::validate_choice(c).ok()) continue;
            out.push_back(c);
          }
  return out;
}

struct brute {
  std::vector<ctpipe::plan_figures> fits, over;
};
brute brute_force(const plan_request& q) {
  brute b;
  for (const auto& c : every_plan(q)) {
    const auto f = ctpipe::predict(q, c);
    CHECK(f.lower_bound <= f.step_time * (1 + 1e-12));
    (f.fits ? b.fits : b.over).push_back(f);
  }
  auto by_time = [](const auto& x, const auto& y) { return x.step_time < y.step_time; };
  std::stable_sort(b.fits.begin(), b.fits.end(), by_time);
  std::stable_sort(b.over.begin(), b.over.end(), by_time);
  return b;
}

void check_against_brute_force(const plan_request& q) {
  const auto r = ctpipe::plan(q);
  const auto b = brute_force(q);
  const int want = std::min<int>(q.keep, static_cast<int>(b.fits.size()));
  REQUIRE(r.best_count == want);
  for (int i = 0; i < want; ++i) {
    const auto& got = r.best[static_cast<std::size_t>(i)];
    CAPTURE(i);
    CHECK(got.step_time == b.fits[static_cast<std::size_t>(i)].step_time);
    const auto again = ctpipe::predict(q, got.choice);  // the plan listed is what its figures say
    CHECK(again.step_time == got.step_time);
    CHECK(again.peak_memory == got.peak_memory);
    CHECK(got.fits);
  }
  // The rejected ones named: those faster than the best that fits, fastest first.
  std::vector<double> faster;
  for (const auto& f : b.over)
    if (b.fits.empty() || f.step_time < b.fits.front().step_time) faster.push_back(f.step_time);
  const int named = std::min<int>(q.keep, static_cast<int>(faster.size()));
  REQUIRE(r.over_memory_count == named);
  for (int i = 0; i < named; ++i) {
    CHECK(r.over_memory[static_cast<std::size_t>(i)].step_time == faster[static_cast<std::size_t>(i)]);
    CHECK_FALSE(r.over_memory[static_cast<std::size_t>(i)].fits);
  }
  CHECK(r.considered == static_cast<int>(every_plan(q).size()));
  CHECK(r.too_large == 0);
  CHECK(r.simulated + r.pruned == r.considered);
}

}  // namespace

TEST_CASE("predict: one device runs the layers one after the other") {
  const std::vector<layer_profile> layers{{.forward = 1,
                                           .backward_input = 2,
                                           .backward_weight = 3,
                                           .overhead = 0.5,
                                           .activation_bytes = 10,
                                           .output_bytes = 4,
                                           .parameter_bytes = 100},
                                          {.forward = 2,
                                           .backward_input = 1,
                                           .backward_weight = 1,
                                           .activation_bytes = 20,
                                           .output_bytes = 4,
                                           .parameter_bytes = 50}};
  const plan_request q{layers, {.devices = 1}, 8};
  // Two microbatches of 4: per microbatch F = 4 (1 + 2) + 0.5, B = 4 (2 + 3 + 1 + 1) + 0.5 (one
  // backward call per layer).
  const auto f = ctpipe::predict(q, {planned_schedule::one_f_one_b, 1, 1, 2, 1, false});
  CHECK(f.microbatch_size == 4);
  CHECK(f.step_time == doctest::Approx(2 * (12.5 + 28.5)));
  CHECK(f.bubble_fraction == doctest::Approx(0.0));
  CHECK(f.allreduce_time == 0.0);
  // 1F1B on one rank keeps one microbatch: 4 samples x 30 bytes; parameters x 4 (the state factor).
  CHECK(f.activation_memory == doctest::Approx(120.0));
  CHECK(f.parameter_memory == doctest::Approx(600.0));
  // GPipe keeps both microbatches.
  CHECK(ctpipe::predict(q, {planned_schedule::gpipe, 1, 1, 2, 1, false}).activation_memory == doctest::Approx(240.0));
  // Recomputing keeps the input (0 bytes here) and rebuilds one microbatch's 120 for its backward,
  // and pays one more forward per backward.
  const auto rc = ctpipe::predict(q, {planned_schedule::gpipe, 1, 1, 2, 1, true});
  CHECK(rc.activation_memory == doctest::Approx(120.0));
  CHECK(rc.step_time == doctest::Approx(2 * (12.5 + 28.5 + 12.5)));
}

TEST_CASE("predict: GPipe's fill and drain, messages priced by their bytes, the all-reduce after") {
  const std::vector<layer_profile> layers(
      2, layer_profile{
             .forward = 1, .backward_input = 1, .backward_weight = 1, .output_bytes = 100, .parameter_bytes = 1000});
  plan_request q{layers, {.devices = 2}, 4};
  // Two ranks, 4 microbatches of 1: F = 1, B = 2, (m + p - 1) (F + B).
  const auto g = ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 4, 1, false});
  CHECK(g.step_time == doctest::Approx(5 * 3.0));
  CHECK(g.bubble_fraction == doctest::Approx(1.0 - 12.0 / 15.0));
  // Latency 0.5 and 200 bytes per unit of time: each message takes 0.5 + 100 / 200 = 1.
  q.cluster.latency = 0.5;
  q.cluster.activation_bandwidth = 200;
  CHECK(ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 4, 1, false}).step_time == doctest::Approx(17.0));
  // Two replicas of one rank: each runs 2 microbatches of 1, then a ring all-reduce of 2000 bytes:
  // 2 (D-1) latencies + 2 (D-1)/D x 2000 / bandwidth.
  q.cluster.allreduce_bandwidth = 1000;
  const auto d = ctpipe::predict(q, {planned_schedule::gpipe, 1, 2, 2, 1, false});
  CHECK(d.allreduce_time == doctest::Approx(2 * 0.5 + 2000.0 / 1000.0));
  CHECK(d.pipeline_time == doctest::Approx(2 * 6.0));
  CHECK(d.step_time == doctest::Approx(12.0 + 3.0));
  CHECK(d.lower_bound <= d.step_time);
}

TEST_CASE("predict: uneven microbatches scale their ops") {
  const std::vector<layer_profile> layers{{.forward = 1, .backward_input = 1, .backward_weight = 1}};
  const std::vector<double> factors{1.0, 3.0};
  plan_request q{layers, {.devices = 1}, 4};
  q.microbatch_factors = factors;
  // Four microbatches of 1, factors 1, 3, 1, 3 (cyclic): 3 x (1 + 3 + 1 + 3).
  CHECK(ctpipe::predict(q, {planned_schedule::one_f_one_b, 1, 1, 4, 1, false}).step_time == doctest::Approx(24.0));
}

TEST_CASE("predict: the stages are balanced by time") {
  std::vector<layer_profile> layers(6, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1});
  layers[0].forward = 13;  // layer 0 (15 per microbatch, F, I and W) is as heavy as the other five
  const plan_request q{layers, {.devices = 2}, 2};
  int first[3]{};
  ctpipe::stage_split(q, {planned_schedule::one_f_one_b, 2, 1, 2, 1, false}, first);
  CHECK(first[0] == 0);
  CHECK(first[1] == 1);
  CHECK(first[2] == 6);
}

TEST_CASE("predict: a choice that breaks a rule is refused with the rule's words") {
  const std::vector<layer_profile> layers(4, layer_profile{.forward = 1});
  const plan_request q{layers, {.devices = 4}, 8};
  using ctpipe::plan_rule;
  CHECK(ctpipe::check_choice(q, {planned_schedule::gpipe, 2, 1, 2, 1, false}) == plan_rule::devices);
  CHECK(ctpipe::check_choice(q, {planned_schedule::gpipe, 2, 2, 3, 1, false}) == plan_rule::batch);
  CHECK(ctpipe::check_choice(q, {planned_schedule::gpipe, 2, 2, 2, 2, false}) == plan_rule::chunks);
  CHECK(ctpipe::check_choice(q, {planned_schedule::zb_v, 4, 1, 8, 2, false}) == plan_rule::layers);
  CHECK(ctpipe::check_choice(q, {planned_schedule::zb_h1, 2, 2, 2, 1, true}) == plan_rule::recompute);
  CHECK_THROWS_WITH_AS(ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 2, 1, false}),
                       "ctpipe::predict: ranks and replicas: ranks x replicas must equal the cluster's devices",
                       ctpipe::plan_error);
  // The schedule's own rules: DualPipeV needs at least 2 x ranks microbatches.
  CHECK_THROWS_AS(ctpipe::predict(q, {planned_schedule::dualpipe_v, 2, 2, 2, 2, false}), ctpipe::schedule_error);
}

TEST_CASE("plan: equals a brute-force search on small cases") {
  std::vector<layer_profile> even(6, layer_profile{.forward = 1,
                                                   .backward_input = 1,
                                                   .backward_weight = 1,
                                                   .overhead = 0.2,
                                                   .activation_bytes = 8,
                                                   .output_bytes = 2,
                                                   .parameter_bytes = 64});
  std::vector<layer_profile> uneven = even;
  uneven[1].forward = 3;
  uneven[4].backward_weight = 4;
  uneven[5].activation_bytes = 40;
  const std::vector<double> factors{1.0, 1.5, 0.5};
  for (const auto* layers : {&even, &uneven})
    for (int devices : {1, 2, 4})
      for (double memory : {0.0, 1200.0, 700.0})
        for (bool with_factors : {false, true}) {
          plan_request q{*layers, {devices, memory, 0.1, 16.0, 256.0}, 16};
          q.max_microbatches = 16;
          q.max_chunks = 3;
          q.keep = 4;
          if (with_factors) q.microbatch_factors = factors;
          CAPTURE(devices);
          CAPTURE(memory);
          CAPTURE(with_factors);
          check_against_brute_force(q);
        }
}

TEST_CASE("plan: counts what it could not consider, and prunes by the bound") {
  const std::vector<layer_profile> layers(
      8, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1, .parameter_bytes = 10});
  plan_request q{layers, {.devices = 4}, 8};
  q.max_microbatches = 8;
  const auto r = ctpipe::plan(q);
  // Interleaved at 4 ranks x 3 chunks needs 12 stages of 8 layers; DualPipeV at 4 ranks needs 8
  // microbatches per replica, and has at most 8 / 1 with one replica (fewer with more).
  CHECK(r.too_few_layers > 0);
  const auto dualpipe_rules =
      r.broke_rule[static_cast<std::size_t>(planned_schedule::dualpipe_v)]
                  [static_cast<std::size_t>(ctpipe::param_rule::microbatches_at_least_two_ranks)];
  CHECK(dualpipe_rules > 0);
  CHECK(r.pruned > 0);
  CHECK(r.simulated + r.pruned == r.considered);
  REQUIRE(r.best_count == 5);
  for (int i = 1; i < r.best_count; ++i) CHECK(r.best[i - 1].step_time <= r.best[i].step_time);
}

TEST_CASE("plan: tables too large to simulate are counted, not simulated") {
  const std::vector<layer_profile> layers(8, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1});
  plan_request q{layers, {.devices = 2}, 64};
  q.max_table_tasks = 9 * 2 * 16;  // 2 ranks x 1 chunk x 16 microbatches: just fits
  const auto r = ctpipe::plan(q);
  CHECK(r.too_large > 0);
  REQUIRE(r.best_count > 0);
  for (int i = 0; i < r.best_count; ++i)
    CHECK(9LL * r.best[i].choice.ranks * r.best[i].choice.chunks * r.best[i].choice.microbatches <= q.max_table_tasks);
}

TEST_CASE("plan: nothing fits: no best plan, the fastest rejected ones named") {
  const std::vector<layer_profile> layers(4, layer_profile{.forward = 1, .parameter_bytes = 1000});
  plan_request q{layers, {.devices = 2, .memory_bytes = 10}, 4};
  const auto r = ctpipe::plan(q);
  CHECK(r.best_count == 0);
  CHECK(r.over_memory_count == 5);
  CHECK(r.too_much_memory == r.considered);
}

TEST_CASE("plan: 64 devices and 96 layers") {
  std::vector<layer_profile> layers(96, layer_profile{1e-4, 1e-4, 1e-4, 2e-5, 4e6, 1e5, 4e8});
  const plan_request q{layers, {64, 80e9, 1e-5, 50e9, 50e9}, 512};
  const auto r = ctpipe::plan(q);
  REQUIRE(r.best_count == 5);
  CHECK(r.top().fits);
  CHECK(r.top().choice.ranks * r.top().choice.replicas == 64);
  CHECK(r.pruned > r.simulated);  // the bound does most of the work
}
