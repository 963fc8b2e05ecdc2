// Elastic freezing (PipeTransformer) on host threads: the elastic plan's freeze points at compile
// time (AutoPipe's halving, refused where the freed devices cannot make whole replicas), the
// freezing policies, and the trainer: training through freezes and re-partitions (4 stages x 1
// replica -> 2 x 2 -> 1 x 4) equals, bitwise, a sequential run that freezes the same layers at the
// same steps and sums the replicas' gradients in replica order; the prefix cache changes nothing;
// failures name the replica; bad freezes are refused.
#include "support/elastic_reference.hpp"
#include "support/numerics.hpp"
#include "support/recording.hpp"

#include <array>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace {

// Cached prefix (CachedPrefix: frozen layers load nothing): 8 layers on 4 devices, 8 microbatches a step.
using cached_plan = ctpipe::elastic_plan<test::mlp, 4, 4, 8, std::array{0, 4, 6}, true>;
static_assert(cached_plan::points[0] == ctpipe::elastic_point{0, 4, 1, 8, 16384.0});
static_assert(cached_plan::points[1].ranks == 2 && cached_plan::points[1].replicas == 2 &&
              cached_plan::points[1].microbatches == 4);
static_assert(cached_plan::points[2].ranks == 1 && cached_plan::points[2].replicas == 4 &&
              cached_plan::points[2].microbatches == 2);
static_assert(cached_plan::stages<1>.frozen() == 4 && cached_plan::stages<1>.first[1] == 6);
static_assert(cached_plan::point_for(5) == 1 && cached_plan::point_for(7) == 2 && cached_plan::point_for(0) == 0);
// The prefix run every step (a third of its cost on stage 0): here no shorter pipeline stays
// within the starting load, so the pipeline keeps its length and only the stages move.
using running_plan = ctpipe::elastic_plan<test::mlp, 4, 4, 8, std::array{0, 4}>;
static_assert(running_plan::points[1].ranks == 4 && running_plan::points[1].replicas == 1);
static_assert(running_plan::stages<1>.frozen() == 4);
// Refused: 6 microbatches cannot be split over 4 replicas, so the pipeline stops at 2 stages.
using six_plan = ctpipe::elastic_plan<test::mlp, 4, 4, 6, std::array{0, 6}, true>;
static_assert(six_plan::points[1].ranks == 2 && six_plan::points[1].replicas == 2);

// The same freeze points for the MLP with state-saving layers and dropout (layer 5: in the frozen
// prefix after the second freeze, which then runs it every step with each step's mask).
using stateful_plan = ctpipe::elastic_plan<test::stateful_mlp, 4, 4, 8, std::array{0, 4, 6}, true>;

// Trains 9 steps, freezing 4 layers after step 3 and 6 after step 6; with `samples`, every step
// passes the ids of its microbatches, and the data repeats every 3 steps (the cache hits).
// Record: every step recorded (record_steps), across the freezes: each replica's pipeline as its
// point's table ran it (every task once, in order, each receive after its send).
template <class Plan, std::size_t I, class Trainer>
void check_recorded(const Trainer& train) {
  constexpr ctpipe::elastic_point pt = Plan::points[I];
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(pt.ranks, pt.microbatches)>();
  for (int r = 0; r < pt.replicas; ++r) test::check_record(table, train.recorded_step(r));
  const auto c = train.recorded_comparison(pt.replicas - 1);
  CHECK(c.replayed > 0.0);
  CHECK(c.replayed <= c.measured + 1e-9);
  CHECK(train.recorded_trace().find("traceEvents") != std::string::npos);
}
template <class Plan = cached_plan>
void through_freezes(bool samples, bool record = false) {
  using model_t = typename Plan::model_t;
  const auto d = test::make_data(24);
  model_t model = test::make_mlp<model_t>();
  test::loss l;
  ctpipe::optimizer opt(model, test::elastic_rule);
  ctpipe::elastic_trainer<Plan, test::loss, decltype(opt)> train(model, l, opt);
  test::elastic_reference<model_t> ref;
  if (record) train.record_steps(true);
  std::vector<std::size_t> ids(8);
  for (int k = 0; k < 9; ++k) {
    if (k == 3) train.freeze(4);
    if (k == 6) train.freeze(6);
    CAPTURE(k);
    const auto at = static_cast<std::size_t>((k % 3) * 8);
    for (std::size_t i = 0; i < 8; ++i) ids[i] = at + i;
    const auto losses =
        train.step(std::span<const test::input>(&d.inputs[at], 8), std::span<const test::target>(&d.targets[at], 8),
                   samples ? std::span<const std::size_t>(ids) : std::span<const std::size_t>());
    const auto expected = ref.step(d, at, train.point());
    REQUIRE(std::vector<double>(losses.begin(), losses.end()) == expected);
    REQUIRE(test::bitwise_equal(test::parameters(model), test::parameters(ref.model)));
    if constexpr (std::is_same_v<Plan, cached_plan>)
      if (record) {
        if (train.point_index() == 0) check_recorded<Plan, 0>(train);
        if (train.point_index() == 1) check_recorded<Plan, 1>(train);
        if (train.point_index() == 2) check_recorded<Plan, 2>(train);
      }
  }
  CHECK(train.point_index() == 2);
  CHECK(train.steps() == 9);
  // Forward only, at the last point (6 layers frozen, the prefix computed): every replica's share,
  // as the sequential forward gives it, no gradient touched.
  const std::vector<float> grads = test::gradients(model);
  CHECK(test::forward_matches(train, ref, d));
  CHECK(test::bitwise_equal(grads, test::gradients(model)));
  if constexpr (std::is_same_v<Plan, cached_plan>) CHECK(train.point().replicas == 4);
}

}  // namespace

TEST_CASE("elastic trainer: through two freezes and re-partitions, bitwise equal to the sequential reference") {
  SUBCASE("the prefix run every step, every step recorded") { through_freezes(false, true); }
  SUBCASE("the prefix from the cache when samples repeat") { through_freezes(true); }
  // Saved state and dropout: each replica's executor numbers its microbatches in the global batch,
  // and the steps go on counting across re-partitions. (Not with the cache: a cached prefix
  // output keeps the mask of the step that computed it.)
  SUBCASE("saved state and dropout, the prefix run every step") { through_freezes<stateful_plan>(false); }
}

TEST_CASE("elastic trainer: end_epoch asks the policy and moves to the freeze point at or below its answer") {
  const auto d = test::make_data(8);
  test::mlp model = test::make_mlp();
  test::loss l;
  ctpipe::sgd opt{0.02};
  ctpipe::elastic_trainer<cached_plan, test::loss, ctpipe::sgd> train(model, l, opt);
  const ctpipe::geometric_freezing half{0.5};  // 4, 6, 7 layers by epochs 1, 2, 3
  train.step(d.inputs, d.targets);
  CHECK(train.end_epoch(half) == 4);
  CHECK(train.point().ranks == 2);
  train.step(d.inputs, d.targets);
  CHECK(train.end_epoch(half) == 6);
  train.step(d.inputs, d.targets);
  CHECK(train.end_epoch(half) == 6);  // 7 wanted: the last point at or below it
  CHECK(train.epoch() == 3);
  // Refused: thawing, and freezing every layer.
  CHECK_THROWS_WITH_AS(train.freeze(2),
                       "ctpipe::elastic_trainer::freeze: layers (2) must be at least the layers frozen now (6: frozen "
                       "layers stay frozen) and below the number of layers (8)",
                       std::invalid_argument);
  CHECK_THROWS_AS(train.freeze(8), std::invalid_argument);
  // The adaptive policy sees the gradient norms of the last two epochs: the active layers' norms.
  int seen_layers = -1;
  train.step(d.inputs, d.targets);
  train.end_epoch([&](const ctpipe::freeze_signal& s) {
    seen_layers = s.layers;
    CHECK(s.epoch == 4);
    CHECK(s.frozen == 6);
    CHECK(s.gradient_norm[0] == 0.0);  // frozen
    CHECK(s.gradient_norm[7] > 0.0);
    CHECK(s.previous_gradient_norm[7] > 0.0);
    return s.frozen;
  });
  CHECK(seen_layers == 8);
}

TEST_CASE("freezing policies: AutoFreeze's geometric schedule and adaptive rule") {
  const ctpipe::geometric_freezing g{0.2};
  CHECK(g({1, 8, 0}) == 2);  // ceil(8 * 0.2)
  CHECK(g({2, 8, 0}) == 3);  // ceil(8 * 0.36)
  CHECK(g({3, 8, 0}) == 4);  // ceil(8 * 0.488)
  CHECK(g({3, 8, 5}) == 5);  // never unfreezes
  const ctpipe::adaptive_freezing a;
  const std::array<double, 6> before{1, 1, 1, 1, 1, 1};
  // Change ratios 0.05, 0.1, 0.5, 0.02, 0.6, 0.7: median of all six 0.3; layers 0, 1 change less.
  const std::array<double, 6> now{1.05, 0.9, 1.5, 1.02, 1.6, 0.3};
  CHECK(a({2, 6, 0, now, before}) == 2);
  // Already 1 frozen: the median of the active five (0.5) and the first active layer reaching it.
  CHECK(a({2, 6, 1, now, before}) == 2);
  CHECK(a({1, 6, 0, now, {}}) == 0);  // the first epoch: nothing to compare
}

namespace {
// A loss that throws on a microbatch whose first target is -1.
struct poison_loss : test::loss {
  double operator()(const test::mlp::output_type& y, const target_type& t, test::mlp::output_type& dy) const {
    if (t[0] == -1) throw std::runtime_error("poisoned target");
    return test::loss::operator()(y, t, dy);
  }
};
}  // namespace

TEST_CASE("elastic trainer: a failing task names the replica and the step's microbatch, the weights are kept") {
  auto d = test::make_data(8);
  test::mlp model = test::make_mlp();
  poison_loss l;
  ctpipe::sgd opt{0.02};
  // Two freeze points only: each point is an executor type (CI's compile time).
  ctpipe::elastic_trainer<ctpipe::elastic_plan<test::mlp, 4, 4, 8, std::array{0, 4}, true>, poison_loss, ctpipe::sgd>
      train(model, l, opt);
  train.freeze(4);  // 2 stages x 2 replicas of 4 microbatches
  const auto before = test::parameters(model);
  d.targets[5][0] = -1;  // replica 1's second microbatch
  try {
    train.step(d.inputs, d.targets);
    FAIL("step() did not throw");
  } catch (const ctpipe::task_failure& e) {
    CHECK(e.replica() == 1);
    CHECK(e.rank() == 1);
    CHECK(e.microbatch() == 5);
    CHECK(std::string(e.what()) ==
          "ctpipe::host_executor: rank 1, replica 1, stage 1, microbatch 5, op B failed: poisoned target");
  }
  CHECK(test::bitwise_equal(test::parameters(model), before));
  d.targets[5][0] = 0;
  CHECK_NOTHROW(train.step(d.inputs, d.targets));
  CHECK_THROWS_AS(train.step(std::span<const test::input>(d.inputs.data(), 4), d.targets), std::invalid_argument);
}
