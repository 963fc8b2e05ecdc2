// The planner's choice run as ranked. At build time `ctpipe plan --emit-header` writes mlp_plan.hpp
// from samples/mlp_plan.json (test::mlp's eight layers as a profiler would measure them: the head
// with the loss three times a hidden layer; tests/tools/CMakeLists.txt); this program includes it
// and trains test::mlp with its schedule and stages on the host executor, bitwise equal to
// sequential training. The constexpr planner, given the same figures, chooses the same plan
// (schedule_of, planned_stages), and its split is not partition<>'s, which sees the layers'
// declared costs alone; partition<> with the loss (partition<Model, S, Loss>) moves towards it.
#include "mlp_plan.hpp"        // generated: the build directory's tests/tools/planned/
#include "mlp_synth_plan.hpp"  // the same, the best synthesised plan (--schedules synthesised)

#include <ctpipe/model/planned_stages.hpp>

#include "support/numerics.hpp"

#include <array>
#include <type_traits>

namespace {

// The model file's figures, as the constexpr planner takes them (a backward alone splits evenly).
constexpr ctpipe::layer_profile profile(double f, double b, double act, double out, double params) {
  return {.forward = f,
          .backward_input = b / 2,
          .backward_weight = b / 2,
          .activation_bytes = act,
          .output_bytes = out,
          .parameter_bytes = params};
}
constexpr std::array<ctpipe::layer_profile, 8> figures{
    profile(1e-6, 2e-6, 128, 128, 2176), profile(2e-6, 4e-6, 128, 128, 4224), profile(2e-6, 4e-6, 128, 128, 4224),
    profile(2e-6, 4e-6, 128, 128, 4224), profile(2e-6, 4e-6, 128, 128, 4224), profile(2e-6, 4e-6, 128, 128, 4224),
    profile(2e-6, 4e-6, 128, 128, 4224), profile(6e-6, 12e-6, 16, 16, 528)};
constexpr ctpipe::plan_request request{
    .layers = figures,
    .cluster = {.devices = 2},
    .global_batch = 48,
    .input_bytes = 64,
    .schedules = ctpipe::schedule_set::none().with(ctpipe::planned_schedule::one_f_one_b),
    .recompute = false,
    .ranks = 2,
    .microbatches = 12};
constexpr ctpipe::plan_choice best = ctpipe::plan(request).top().choice;
static_assert(best == ctpipe::plan_choice{ctpipe::planned_schedule::one_f_one_b, 2, 1, 12, 1, false});

// The header holds that plan: its schedule, sizes and stages are the constexpr planner's.
static_assert(std::is_same_v<std::remove_cv_t<decltype(mlp_plan::schedule)>, decltype(ctpipe::schedule_of<best>())>);
static_assert(mlp_plan::schedule.info().ranks == 2 && mlp_plan::schedule.info().microbatches == test::microbatches);
static_assert(mlp_plan::microbatch_size == static_cast<int>(test::batch) && mlp_plan::replicas == 1);
constexpr auto stages = mlp_plan::stages<test::mlp>();
constexpr auto planned = ctpipe::planned_stages<test::mlp, best>(request);
static_assert(stages.first == planned.first && stages.recompute == planned.recompute);
static_assert(stages.first == std::array{0, 5, 8});
// partition<> balances the declared costs (the head is an eighth of a hidden layer's): another split.
static_assert(ctpipe::partition<test::mlp, 2>().first == std::array{0, 4, 8});
// partition<Model, S, Loss> counts the loss's declared cost on the last stage: softmax
// cross-entropy's (8 per logit) is small beside these layers; a loss declared as heavy as the
// measured one moves the split to the planner's. Each stage's `cost` stays its layers' own.
static_assert(test::loss::cost == 8.0 * test::batch * test::classes);
static_assert(ctpipe::partition<test::mlp, 2, test::loss>().first == std::array{0, 4, 8});
struct heavy_loss : test::loss {
  static constexpr double cost = 20000;
};
constexpr auto with_loss = ctpipe::partition<test::mlp, 2, heavy_loss>();
static_assert(with_loss.first == std::array{0, 5, 8});
static_assert(with_loss.cost[1] == 2 * 8192.0 + 1024.0 && with_loss.max_stage_cost == with_loss.cost[1] + 20000);

constexpr auto table = ctpipe::make_table<mlp_plan::schedule, ctpipe::model_crossings<test::mlp, stages>()>();
using exec_t = ctpipe::host_executor<table, test::mlp, stages, test::loss>;

// The best synthesised plan for the same figures: the header's schedule (its costs in whole units
// and its memory limit written out) is the constexpr planner's, value for value.
constexpr ctpipe::plan_request synth_request = [] {
  ctpipe::plan_request q = request;
  q.schedules = ctpipe::schedule_set::none().with(ctpipe::planned_schedule::synthesised);
  return q;
}();
constexpr ctpipe::plan_choice best_synth = ctpipe::plan(synth_request).top().choice;
static_assert(best_synth.schedule == ctpipe::planned_schedule::synthesised && best_synth.memory_limit == 4);
static_assert(mlp_synth::schedule == ctpipe::schedule_of<best_synth>());
constexpr auto synth_stages = mlp_synth::stages<test::mlp>();
static_assert(synth_stages.first == stages.first);
constexpr auto synth_table =
    ctpipe::make_table<mlp_synth::schedule, ctpipe::model_crossings<test::mlp, synth_stages>()>();
using synth_exec_t = ctpipe::host_executor<synth_table, test::mlp, synth_stages, test::loss>;

// Three steps of `Exec` against sequential training, every loss, gradient and update bitwise.
template <class Exec>
void train_bitwise(int microbatches) {
  test::mlp model = test::make_mlp(), reference = test::make_mlp();
  test::loss l;
  Exec exec(model, l);
  ctpipe::optimizer opt(model, test::sweep_rule, test::sweep_clip);
  ctpipe::optimizer ref_opt(reference, test::sweep_rule, test::sweep_clip);
  const test::data_set d = test::make_data(microbatches);
  std::vector<double> want(d.inputs.size());
  for (int step = 0; step < 3; ++step) {
    const auto got = exec.step(d.inputs, d.targets);
    ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                            std::span<const test::target>(d.targets), std::span<double>(want),
                            {static_cast<std::uint64_t>(step), 0});
    for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == want[i]);
    REQUIRE(test::bitwise_equal(test::gradients(model), test::gradients(reference)));
    int clipped = 0;
    test::same_update(opt.step(), ref_opt.step(), clipped);
  }
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(reference)));
}

}  // namespace

TEST_CASE("a plan from `ctpipe plan --emit-header` trains test::mlp bitwise equal to sequential training") {
  train_bitwise<exec_t>(mlp_plan::microbatches);
}

TEST_CASE("a synthesised plan from `ctpipe plan --emit-header` trains test::mlp bitwise equal to sequential training") {
  train_bitwise<synth_exec_t>(mlp_synth::microbatches);
}
