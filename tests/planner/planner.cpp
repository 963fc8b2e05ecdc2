// The planner: its predictions worked by hand, its rules, and its search against a brute force.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
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
            plan_choice c{static_cast<planned_schedule>(k), p, q.cluster.devices / p, m, v, rc == 1};
            if (!q.schedules.has(c.schedule) || (rc == 1 && !q.recompute)) continue;
            if (ctpipe::takes_chunks(c.schedule) && (v < 2 || v > q.max_chunks)) continue;
            // One rank: one schedule, its fewest chunks (every other is the same plan).
            if (p == 1 &&
                (c.schedule != ctpipe::one_rank_schedule(q.schedules) || (ctpipe::takes_chunks(c.schedule) && v != 2)))
              continue;
            if (ctpipe::check_choice(q, c) != ctpipe::plan_rule::ok) continue;
            if (c.schedule == planned_schedule::synthesised) c = ctpipe::with_synthesis_inputs(q, c);
            if (!ctpipe::validate_choice(c).ok()) continue;
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

TEST_CASE("calibrate: each stage of a measured run costs what it measured, and the planner balances that") {
  // Two stages of a run at 4 samples a microbatch: layers 0 and 1 measured (two sizes, and one),
  // layers 2 and 3 given per sample with an overhead.
  std::vector<layer_profile> layers(4);
  layers[0].timings[0] = {2, 1.0, 0.5, 0.5};
  layers[0].timings[1] = {8, 4.0, 2.0, 2.0};
  layers[0].timed = 2;
  layers[1].timings[0] = {4, 2.0, 1.0, 1.0};
  layers[1].timed = 1;
  layers[2] = layer_profile{.forward = 0.5, .backward_input = 0.25, .backward_weight = 0.25, .overhead = 1.0};
  layers[3] = layers[2];
  const auto before = layers;
  auto op = [](const layer_profile& l, int o, double n) { return ctpipe::detail::op_time(l, o, n); };
  const int first[] = {0, 2};
  const ctpipe::stage_time measured[] = {{7.0, 3.0}, {3.0, 12.0}};  // F 4 -> 7, B 4 -> 3; F 6 -> 3, B 8 -> 12
  ctpipe::calibrate(layers, {first, measured, 4.0});
  for (int s = 0; s < 2; ++s) {
    double f = 0, b = 0;
    for (int k = 2 * s; k < 2 * s + 2; ++k)
      f += op(layers[static_cast<std::size_t>(k)], 0, 4),
          b += op(layers[static_cast<std::size_t>(k)], 1, 4) + op(layers[static_cast<std::size_t>(k)], 2, 4);
    CHECK(f == doctest::Approx(measured[s].forward));
    CHECK(b == doctest::Approx(measured[s].backward));
  }
  // Every size scaled alike: a stage's layers keep their proportions, at every microbatch size.
  CHECK(op(layers[0], 0, 8) == doctest::Approx(4.0 * 7.0 / 4.0));
  CHECK(op(layers[1], 1, 2) == doctest::Approx(0.5 * 3.0 / 4.0));
  // A layer given per sample is written as its line at 4 and 8 samples, then scaled: the same line.
  CHECK(layers[2].timed == 2);
  for (const double n : {1.0, 4.0, 16.0}) {
    CHECK(op(layers[2], 0, n) == doctest::Approx(op(before[2], 0, n) * 3.0 / 6.0));
    CHECK(op(layers[3], 1, n) == doctest::Approx(op(before[3], 1, n) * 12.0 / 8.0));
  }
  // Rules: each refused with its words, nothing scaled.
  const auto rule = [&](std::span<const int> f, std::span<const ctpipe::stage_time> t, double n) {
    return ctpipe::check_calibration(4, {f, t, n});
  };
  using ctpipe::calibration_rule;
  const int late[] = {1, 2}, repeated[] = {0, 0}, past[] = {0, 4}, one[] = {0};
  const ctpipe::stage_time negative[] = {{1.0, -1.0}, {1.0, 1.0}};
  CHECK(rule(first, measured, 4) == calibration_rule::ok);
  CHECK(rule(first, measured, 0) == calibration_rule::samples);
  CHECK(rule(first, measured, 1e18) == calibration_rule::samples);
  CHECK(rule(one, measured, 4) == calibration_rule::stage_count);
  CHECK(rule(late, measured, 4) == calibration_rule::first_layers);
  CHECK(rule(repeated, measured, 4) == calibration_rule::first_layers);
  CHECK(rule(past, measured, 4) == calibration_rule::first_layers);
  CHECK(rule(first, negative, 4) == calibration_rule::times);
  auto kept = before;
  CHECK_THROWS_WITH_AS(ctpipe::calibrate(kept, {late, measured, 4.0}),
                       "ctpipe::calibrate: a calibration's stages' first layers must start at 0 and grow, each below "
                       "the model's layer count",
                       std::invalid_argument);
  CHECK(kept[2].timed == 0);
  // A stage whose layers take next to nothing, measured at a second: refused, not scaled to infinity.
  std::vector<layer_profile> tiny(4, layer_profile{.forward = 1e-20, .backward_input = 1, .backward_weight = 1});
  const ctpipe::stage_time slow[] = {{1.0, 2.0}, {1.0, 2.0}};
  CHECK_THROWS_WITH_AS(ctpipe::calibrate(tiny, {first, slow, 1.0}),
                       "ctpipe::calibrate: a calibration may scale a stage's layers by at most 1e18",
                       std::invalid_argument);
  CHECK(tiny[0].timed == 0);  // (nothing changed, the first stage's layers neither)
  // The planner balances the calibrated layers: four alike, measured on two stages where the
  // second ran three times as long; the best split moves a layer to the first stage.
  std::vector<layer_profile> alike(4, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1});
  const plan_choice c{planned_schedule::one_f_one_b, 2, 1, 2, 1, false};
  int split[3]{};
  ctpipe::stage_split(plan_request{alike, {.devices = 2}, 2}, c, split);
  CHECK(split[1] == 2);
  const ctpipe::stage_time heavier[] = {{2.0, 4.0}, {6.0, 12.0}};
  ctpipe::calibrate(alike, {first, heavier, 1.0});
  ctpipe::stage_split(plan_request{alike, {.devices = 2}, 2}, c, split);
  CHECK(split[1] == 3);
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
  // A GPT's shape: a tied head, a residual skip, layers measured at several sizes.
  std::vector<layer_profile> shaped = uneven;
  shaped[5].shares_with = 0;
  shaped[4].skip = 3;
  shaped[2].timings = {{{1, 0.5, 1, 0.2}, {4, 3, 3, 2}, {16, 20, 10, 9}}};
  shaped[2].timed = 3;
  const std::vector<double> factors{1.0, 1.5, 0.5};
  for (const auto* layers : {&even, &uneven, &shaped})
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

TEST_CASE("predict: measured timings stand for the per-sample figures, interpolated between sizes") {
  // One layer timed at 2, 4 and 8 samples: F 3, 4, 8; I 1, 2, 4; W 2, 2, 2 (its per-sample figures,
  // which the timings replace, would give far more).
  layer_profile l{.forward = 100, .backward_input = 100, .backward_weight = 100, .overhead = 100};
  l.timings = {{{2, 3, 1, 2}, {4, 4, 2, 2}, {8, 8, 4, 2}}};
  l.timed = 3;
  const std::vector<layer_profile> layers{l};
  const auto step = [&](int batch, int m) {
    const plan_request q{layers, {.devices = 1}, batch};
    return ctpipe::predict(q, {planned_schedule::one_f_one_b, 1, 1, m, 1, false}).step_time;
  };
  CHECK(step(8, 2) == doctest::Approx(2 * (4 + 2 + 2)));      // a measured size: 4 samples
  CHECK(step(12, 2) == doctest::Approx(2 * (6 + 3 + 2)));     // 6: halfway between 4 and 8
  CHECK(step(16, 1) == doctest::Approx(16 + 8 + 2));          // 16: the line through 4 and 8, on
  CHECK(step(3, 3) == doctest::Approx(3 * (2.5 + 0.5 + 2)));  // 1: the line through 2 and 4, back
  l.timed = 1;                                                // one size: in proportion to samples
  const std::vector<layer_profile> one{l};
  const plan_request q{one, {.devices = 1}, 8};
  CHECK(ctpipe::predict(q, {planned_schedule::one_f_one_b, 1, 1, 2, 1, false}).step_time ==
        doctest::Approx(2 * (6 + 2 + 4)));
}

TEST_CASE("predict: a skip's bytes cross with the stage that makes them, into the stage that reads them") {
  // Four layers of 10 output bytes a sample; layer 3 also reads layer 0's output (skip 3). On 2
  // ranks the stages are [0, 2) and [2, 4): the boundary carries layer 1's output and layer 0's.
  std::vector<layer_profile> layers(
      4, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1, .output_bytes = 10});
  layers[3].skip = 3;
  plan_request q{layers, {.devices = 2, .latency = 0, .activation_bandwidth = 10}, 2};
  q.input_bytes = 5;
  // Two microbatches of 1: F = 2, B = 4 per stage; every message 20 bytes: 2 units of time.
  // GPipe: F0 F0' | msg | F1 F1' ...: (m + p - 1) (F + B) + 2 messages on the critical path.
  const auto g = ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 2, 1, false});
  CHECK(g.step_time == doctest::Approx(3 * 6.0 + 2 * 2.0));
  layers[3].skip = 0;  // without it: 10 bytes, 1 unit each
  CHECK(ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 2, 1, false}).step_time ==
        doctest::Approx(3 * 6.0 + 2 * 1.0));
  // A recomputing second stage keeps what it received, both tensors: 2 microbatches x 20 bytes
  // (the first keeps the input: 2 x 5).
  layers[3].skip = 3;
  const auto rc = ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 2, 1, true});
  CHECK(rc.peak_rank == 1);
  CHECK(rc.activation_memory == doctest::Approx(2 * 20.0));
  // A skip from before the first layer reads the model's input: its 5 bytes a sample join the
  // boundary in place of layer 0's 10 (15 bytes: 1.5 units).
  layers[3].skip = 9;
  CHECK(ctpipe::predict(q, {planned_schedule::gpipe, 2, 1, 2, 1, false}).step_time == doctest::Approx(18.0 + 2 * 1.5));
}

TEST_CASE("predict: a tied head's parameters, once on one rank, summed between two") {
  // Four layers of 100 parameter bytes; layer 3 shares layer 0's (a head tied to the embedding).
  std::vector<layer_profile> layers(
      4, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1, .parameter_bytes = 100});
  layers[3].shares_with = 0;
  plan_request q{layers, {.devices = 2, .latency = 0.5, .allreduce_bandwidth = 100}, 4};
  // Two replicas of one rank: 300 bytes each (the shared matrix once), a ring all-reduce of those.
  const auto d = ctpipe::predict(q, {planned_schedule::one_f_one_b, 1, 2, 2, 1, false});
  CHECK(d.parameter_memory == doctest::Approx(4 * 300.0));
  CHECK(d.allreduce_time == doctest::Approx(2 * 0.5 + 300.0 / 100.0));
  // Two ranks: each holds a copy (200 bytes each), and they sum its gradient when both are done
  // (an all-reduce of two: 2 latencies + 100 / bandwidth): the last backward ends at the makespan.
  const auto p = ctpipe::predict(q, {planned_schedule::one_f_one_b, 2, 1, 4, 1, false});
  CHECK(p.parameter_memory == doctest::Approx(4 * 200.0));
  CHECK(p.allreduce_time == doctest::Approx(2 * 0.5 + 100.0 / 100.0));
  CHECK(p.step_time == doctest::Approx(p.pipeline_time + 2.0));
  CHECK(p.lower_bound <= p.step_time);
  // Interleaved, 2 chunks: stages [0], [1], [2], [3] on ranks 0, 1, 0, 1: layer 0 on rank 0, its
  // copy on rank 1 again.
  const auto v = ctpipe::predict(q, {planned_schedule::interleaved, 2, 1, 4, 2, false});
  CHECK(v.parameter_memory == doctest::Approx(4 * 200.0));
  // Sharing an earlier layer that shares none is the rule.
  layers[3].shares_with = 3;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::shares_with);
  layers[3].shares_with = -1;
  layers[2].shares_with = 0;
  layers[3].shares_with = 2;
  CHECK_THROWS_WITH_AS(
      ctpipe::plan(q),
      "ctpipe::predict: shares_with: a layer may share the parameters of an earlier layer that shares none",
      ctpipe::plan_error);
}

TEST_CASE("plan: on one rank, one plan per microbatch count, not one per schedule") {
  const std::vector<layer_profile> layers(
      4, layer_profile{.forward = 1, .backward_input = 1, .backward_weight = 1, .activation_bytes = 4});
  plan_request q{layers, {.devices = 1}, 4};
  q.keep = 8;
  const auto r = ctpipe::plan(q);
  // m = 1, 2, 4, each with and without recomputation: six plans, all 1F1B.
  CHECK(r.considered == 6);
  CHECK(r.best_count == 6);
  for (int i = 0; i < r.best_count; ++i) CHECK(r.best[i].choice.schedule == planned_schedule::one_f_one_b);
  CHECK(r.same_plan > 0);
  // Without 1F1B in the set, the set's first.
  q.schedules = ctpipe::schedule_set::none().with(planned_schedule::zb_v).with(planned_schedule::interleaved);
  const auto z = ctpipe::plan(q);
  REQUIRE(z.best_count == 6);
  CHECK(z.top().choice.schedule == planned_schedule::interleaved);
  CHECK(z.top().choice.chunks == 2);
}

TEST_CASE("plan: the reserve is kept out of each device's memory") {
  const std::vector<layer_profile> layers(
      2, layer_profile{
             .forward = 1, .backward_input = 1, .backward_weight = 1, .activation_bytes = 10, .parameter_bytes = 100});
  plan_request q{layers, {.devices = 1, .memory_bytes = 1000}, 2};
  q.recompute = false;
  // One microbatch of 2: 800 bytes of parameters with their state, 40 of activations.
  CHECK(ctpipe::plan(q).top().peak_memory == doctest::Approx(840.0));
  q.cluster.reserved_bytes = 170;
  CHECK(ctpipe::plan(q).top().peak_memory == doctest::Approx(820.0));  // two microbatches of 1
  q.cluster.reserved_bytes = 181;
  CHECK(ctpipe::plan(q).best_count == 0);
  q.cluster.reserved_bytes = 1000;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::reserve);
  q.cluster.reserved_bytes = -1;
  CHECK_THROWS_WITH_AS(
      ctpipe::plan(q),
      "ctpipe::predict: reserved memory: the reserve must be at least 0, and less than the device's memory",
      ctpipe::plan_error);
}

TEST_CASE("plan: timings and skips out of order are refused") {
  std::vector<layer_profile> layers(2, layer_profile{.forward = 1});
  const plan_request q{layers, {.devices = 1}, 2};
  layers[1].timings[0] = {4, 1, 1, 1};
  layers[1].timings[1] = {2, 1, 1, 1};
  layers[1].timed = 2;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::timings);
  layers[1].timings[1].samples = 8;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::ok);
  layers[1].timings[1].forward = -1;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::timings);
  layers[1].timed = 9;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::timings);
  layers[1].timed = 0;
  layers[1].skip = 1;
  CHECK(ctpipe::check_request(q) == ctpipe::plan_rule::skip);
}

namespace {
// The memory cases' model: 8 equal layers (F = I = 1, W as given), activations 100 times the
// weights; and the request for it on 4 ranks, 8 microbatches of one sample, no recomputation.
std::vector<layer_profile> eight_layers(double weight) {
  return std::vector<layer_profile>(8, layer_profile{.forward = 1,
                                                     .backward_input = 1,
                                                     .backward_weight = weight,
                                                     .activation_bytes = 100,
                                                     .output_bytes = 1,
                                                     .parameter_bytes = 1});
}
plan_request four_ranks(const std::vector<layer_profile>& layers, ctpipe::cluster_profile cluster) {
  plan_request q{layers, cluster, 8};
  q.ranks = 4;
  q.microbatches = 8;
  q.recompute = false;
  return q;
}
}  // namespace

TEST_CASE("plan: under a tight memory limit only the V family and synthesis fit, and the planner picks V-Half") {
  // 8 equal layers on 4 ranks, 8 microbatches of one sample, activations far larger than weights.
  const auto layers = eight_layers(1);
  plan_request q = four_ranks(layers, {.devices = 4});
  auto figures = [&](planned_schedule s) {
    return ctpipe::predict(q, {s, 4, 1, 8, ctpipe::v_placed(s) ? 2 : 1, false});
  };
  // Rank 0's activations: 1F1B and ZB-H1 keep 4 microbatches of 2 layers, ZB-V 8 half stages,
  // V-Half 6 and V-Min 4 (of one layer each).
  const double half = figures(planned_schedule::v_half).peak_memory,
               least = figures(planned_schedule::v_min).peak_memory;
  CHECK(figures(planned_schedule::v_half).activation_memory == doctest::Approx(600));
  CHECK(least < half);
  double others = 1e30;
  for (int k = 0; k < ctpipe::planned_schedule_count; ++k) {
    const auto s = static_cast<planned_schedule>(k);
    if (s == planned_schedule::v_half || s == planned_schedule::v_min || ctpipe::takes_chunks(s) ||
        s == planned_schedule::dualpipe || s == planned_schedule::dualpipe_v || s == planned_schedule::synthesised)
      continue;  // (chunked schedules hold more; DualPipe needs m >= 2p and holds p + 1; synthesis: below)
    others = std::min(others, figures(s).peak_memory);
  }
  REQUIRE(half < others);
  q.cluster.memory_bytes = (half + others) / 2;
  const auto r = ctpipe::plan(q);
  // V-Half, V-Min and a table synthesised for 3 activations a rank (one stage a rank, below 1F1B's
  // 4), nothing else; here the V placement is faster.
  REQUIRE(r.best_count == 3);
  CHECK(r.top().choice.schedule == planned_schedule::v_half);
  CHECK(r.best[1].choice.schedule == planned_schedule::v_min);
  CHECK(r.best[2].choice.schedule == planned_schedule::synthesised);
  CHECK(r.best[2].choice.memory_limit == 3);
  CHECK(r.top().step_time < r.best[1].step_time);
  CHECK(r.best[1].step_time < r.best[2].step_time);
  for (int i = 0; i < r.over_memory_count; ++i) {
    CHECK(r.over_memory[i].choice.schedule != planned_schedule::v_half);
    CHECK(r.over_memory[i].choice.schedule != planned_schedule::v_min);
    CHECK(r.over_memory[i].choice.schedule != planned_schedule::synthesised);
  }
}

TEST_CASE("plan: between ZB-H1's memory and ZB-H2's, a synthesised table is the fastest one-stage plan") {
  // The model above with a W half as long as F (F : I : W = 2 : 2 : 1), the one-stage-a-rank
  // schedules only. ZB-H1 keeps 4 microbatches of a stage on rank 0 (800 bytes), ZB-H2 7 (1,400);
  // the devices have room for 5.
  const auto layers = eight_layers(0.5);
  plan_request q = four_ranks(layers, {.devices = 4, .memory_bytes = 1200});
  q.schedules = ctpipe::schedule_set::none()
                    .with(planned_schedule::one_f_one_b)
                    .with(planned_schedule::zb_h1)
                    .with(planned_schedule::zb_h2)
                    .with(planned_schedule::synthesised);
  const auto r = ctpipe::plan(q);
  REQUIRE(r.best_count == 3);
  CHECK(r.top().choice.schedule == planned_schedule::synthesised);
  CHECK(r.top().choice.memory_limit == 5);
  CHECK(r.top().activation_memory <= 5 * 200);
  CHECK(r.best[1].choice.schedule == planned_schedule::zb_h1);
  CHECK(r.top().step_time < r.best[1].step_time);
  REQUIRE(r.over_memory_count == 1);
  CHECK(r.over_memory[0].choice.schedule == planned_schedule::zb_h2);
  MESSAGE("synthesised ", r.top().step_time, " against ZB-H1's ", r.best[1].step_time, " and ZB-H2's ",
          r.over_memory[0].step_time, " (over memory)");
  // The plan runs as the planner predicted: the table it names proves, and its synthesis inputs
  // are those the search gave it.
  const auto again = ctpipe::with_synthesis_inputs(q, {planned_schedule::synthesised, 4, 1, 8, 1, false});
  CHECK(again == r.top().choice);
  CHECK(ctpipe::verify(ctpipe::generate(ctpipe::synthesise_heuristic(4, 8, again.costs, again.memory_limit))).ok());
}
