// The planner in a constant expression: a user's unit test can static_assert which plan wins.
#include <array>

#include <ctpipe/schedules.hpp>

namespace {

using ctpipe::layer_profile;
using ctpipe::planned_schedule;

// Small questions: a constant evaluation simulates every plan it cannot prune, within the
// compiler's default limits (clang 14: 1M evaluation steps).
constexpr std::array<layer_profile, 4> layers = [] {
  std::array<layer_profile, 4> l{};
  for (auto& x : l)
    x = {.forward = 1,
         .backward_input = 1,
         .backward_weight = 1,
         .activation_bytes = 16,
         .output_bytes = 4,
         .parameter_bytes = 100};
  return l;
}();

constexpr ctpipe::plan_request ask(ctpipe::cluster_profile c) {
  ctpipe::plan_request q{layers, c, 16};
  q.max_microbatches = 8;
  q.max_chunks = 2;
  return q;
}

// Four devices, a batch of 16, no memory limit: the whole batch through one pipeline of 4 ranks
// has a bubble; 4 replicas of one rank have none and a free all-reduce. Data parallelism wins.
constexpr ctpipe::plan_request free_links = ask({.devices = 4});
static_assert(ctpipe::plan(free_links).top().choice.replicas == 4);
static_assert(ctpipe::plan(free_links).top().step_time == 4 * 4 * 3.0);

// A slow all-reduce (1 byte per unit of time; 400 bytes of parameters per replica) makes the
// pipeline win, and it is a zero-bubble one with the most microbatches allowed.
constexpr auto best = ctpipe::plan(ask({.devices = 4, .allreduce_bandwidth = 1})).top();
static_assert(best.choice.ranks == 4 && best.choice.replicas == 1);
static_assert(best.choice.schedule == planned_schedule::zb_h1 && best.choice.microbatches == 8);
static_assert(best.step_time < 16 * 4 * 3.0 / 4 * 1.25);

// Memory decides: 1,400 bytes per device. Four replicas each hold every parameter (1,600 bytes with
// their state): they do not fit, and they are named as the faster plan rejected for memory.
constexpr ctpipe::plan_request tight = ask({.devices = 4, .memory_bytes = 1400});
constexpr auto tight_plan = ctpipe::plan(tight);
static_assert(tight_plan.top().peak_memory <= 1400);
static_assert(tight_plan.top().choice.replicas < 4);
static_assert(tight_plan.over_memory_count >= 1 && tight_plan.over_memory[0].choice.replicas == 4);

// predict() on one plan, figures worked by hand: GPipe, 2 ranks x 2 replicas, 2 microbatches of 4
// per replica, 2 layers per stage: F = 8, B = 16 per microbatch, (m + p - 1) (F + B).
static_assert(ctpipe::predict(free_links, {planned_schedule::gpipe, 2, 2, 2, 1, false}).step_time == 3 * 24.0);

// Layers measured at several microbatch sizes: a microbatch of 4 samples costs what was measured
// at 4, not 4 times the time of one. One rank, 1F1B, 2 microbatches of 4: 2 x (F + I + W) x 4 layers.
constexpr std::array<layer_profile, 4> timed = [] {
  std::array<layer_profile, 4> l{};
  for (auto& x : l) {
    x.timings = {{{1, 2, 2, 2}, {4, 3, 3, 3}}};
    x.timed = 2;
  }
  return l;
}();
static_assert(ctpipe::predict({timed, {.devices = 1}, 8}, {planned_schedule::one_f_one_b, 1, 1, 2, 1, false})
                  .step_time == 2 * 9.0 * 4);
// On one rank every schedule is the same plan: the planner forms 1F1B's alone.
static_assert(ctpipe::plan({timed, {.devices = 1}, 8}).top().choice.schedule == planned_schedule::one_f_one_b);

// Calibrated at compile time by a run of two stages [0, 2) and [2, 4) at 4 samples a microbatch,
// the second measured at three times its layers' sum (F 6 -> 18, backward 12 -> 36): one rank's
// 1F1B step grows by the second stage's extra, 2 microbatches x (18 - 6 + 36 - 12).
constexpr std::array<layer_profile, 4> calibrated = [] {
  auto l = timed;
  constexpr int first[] = {0, 2};
  constexpr ctpipe::stage_time measured[] = {{6, 12}, {18, 36}};
  ctpipe::calibrate(l, {first, measured, 4});
  return l;
}();
static_assert(ctpipe::predict({calibrated, {.devices = 1}, 8}, {planned_schedule::one_f_one_b, 1, 1, 2, 1, false})
                  .step_time == 2 * 9.0 * 4 + 2 * (12.0 + 24.0));
static_assert(ctpipe::check_calibration(4, {std::span<const int>(), std::span<const ctpipe::stage_time>(), 4}) ==
              ctpipe::calibration_rule::stage_count);

}  // namespace
