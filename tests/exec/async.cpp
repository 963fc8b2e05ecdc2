// The asynchronous executor (PipeDream's 1F1B without flush): after N microbatches and finish(),
// the parameters are bitwise those of a sequential run that applies the same staleness rule,
// written out here from the rules of docs/schedules.md (not from the library's formulas): with weight stashing,
// F(i) and B(i) of stage s use version max(0, i - (p-1-s)) and every microbatch updates; with 2BW,
// every F and B of minibatch k uses version max(0, k - 1) and every minibatch updates
// (W(t+1) = W(t) - lr * grad f(W(t-1))). Also: p = 1 is plain SGD; the losses returned are the
// reference's; ctpipe::optimizer (AdamW) and a user's own optimizer with state; failures name the
// rank, stage and microbatch, and the pipeline starts afresh.
#include "support/numerics.hpp"
#include "support/recording.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using ctpipe::weight_versions;

// Copies of the model, one per version v (after v updates of every stage). The model that
// microbatch i (or minibatch k) runs with takes each stage's layers from the version the rule names.
template <auto Stages, class M, class VersionOf>
M mixed(const std::vector<M>& history, VersionOf version_of_stage) {
  M m;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    ((m.template layer<K>() =
          history[static_cast<std::size_t>(version_of_stage(Stages.stage_of_layer(static_cast<int>(K))))]
              .template layer<K>()),
     ...);
  }
  (std::make_index_sequence<M::size>{});
  return m;
}

// next = current, each layer then updated by opt(layer, parameters, gradients of `grads`).
template <class M, class Opt>
M updated(const M& current, M& grads, Opt& opt) {
  M next = current;
  std::vector<std::span<float>> g;
  ctpipe::for_each_layer(grads, [&](auto& l) {
    if constexpr (ctpipe::has_parameters<std::remove_cvref_t<decltype(l)>>)
      g.push_back(l.gradients());
    else
      g.emplace_back();
  });
  std::size_t k = 0;
  ctpipe::for_each_layer(next, [&](auto& l) {
    if constexpr (ctpipe::has_parameters<std::remove_cvref_t<decltype(l)>>)
      opt(k, l.parameters(), std::span<const float>(g[k].data(), g[k].size()));
    ++k;
  });
  return next;
}

// The sequential reference: the losses of N = steps x m microbatches and the final model.
// The layers' context (dropout): microbatch i of the run was fed by step first_step + i / M, as the
// i % M-th of its step. A model with extents: microbatch i of the run uses e[i] tokens.
template <int P, int M, weight_versions V, class Opt, class Model, class Input>
Model reference_run(const Model& init, const test::basic_data_set<Input>& d, int steps, Opt& opt,
                    std::vector<double>& losses, std::span<const int> e, int first_step = 0) {
  constexpr auto stages = ctpipe::partition<Model, P>();
  test::loss_for<Model> l;
  const auto extents_of = [&](std::size_t at, std::size_t n) { return e.empty() ? e : e.subspan(at, n); };
  std::vector<Model> history{init};
  const int n = steps * M;
  losses.assign(static_cast<std::size_t>(n), 0.0);
  if constexpr (V == weight_versions::stashed) {
    for (int i = 0; i < n; ++i) {
      auto m = mixed<stages>(history, [&](int s) { return std::max(0, i - (P - 1 - s)); });
      const auto at = static_cast<std::size_t>(i);
      ctpipe::sequential_step(m, l, std::span<const Input>(&d.inputs[at], 1),
                              std::span<const test::target>(&d.targets[at], 1), extents_of(at, 1),
                              std::span<double>(&losses[at], 1),
                              {static_cast<std::uint64_t>(first_step + i / M), i % M});
      history.push_back(updated(history.back(), m, opt));
    }
  } else {
    for (int k = 0; k < steps; ++k) {
      auto m = mixed<stages>(history, [&](int) { return std::max(0, k - 1); });
      const auto at = static_cast<std::size_t>(k * M);
      ctpipe::sequential_step(m, l, std::span<const Input>(&d.inputs[at], M),
                              std::span<const test::target>(&d.targets[at], M), extents_of(at, M),
                              std::span<double>(&losses[at], M), {static_cast<std::uint64_t>(first_step + k), 0});
      history.push_back(updated(history.back(), m, opt));
    }
  }
  return history.back();
}

template <int P, int M, weight_versions V>
constexpr ctpipe::async_schedule schedule_of() {
  return V == weight_versions::stashed ? ctpipe::pipedream(P, M) : ctpipe::pipedream_2bw(P, M);
}

// Trains through the executor for `steps` steps of M microbatches, finishes, and compares every
// loss and, at the end, every parameter with the reference, bitwise. Then trains on (a second run
// of the same executor, from the finished weights) to check that finish() leaves it reusable. A
// model with extents: microbatches of mixed lengths, each extent travelling through the pipeline
// with its microbatch, into the steps after the one that fed it.
// Opt: a callable opt(layer, parameters, gradients) made from Rule (a copy of it), or a
// ctpipe::optimizer, made over the model from its rule (state per layer and tensor).
template <class Opt, class Model, class Rule>
Opt make_optimizer(Model& m, const Rule& rule) {
  if constexpr (std::is_same_v<Opt, Rule>)
    return rule;
  else
    return Opt(m, rule);
}

template <int P, int M, weight_versions V, class Opt = ctpipe::sgd, class Model = test::mlp, class Rule = Opt>
void against_reference(int steps, Rule rule = Rule{0.05}) {
  constexpr auto schedule = schedule_of<P, M, V>();
  constexpr auto stages = ctpipe::partition<Model, P>();
  using Loss = test::loss_for<Model>;
  using Input = typename Model::input_type;
  using exec_t = ctpipe::async_executor<schedule, Model, stages, Loss, Opt>;
  const Model init = test::make_mlp<Model>();
  const auto d = test::make_data<Input>(steps * M);
  const std::vector<int> e = Model::token_capacity > 0 ? test::extents(steps * M) : std::vector<int>{};
  const auto extents_of = [&](std::size_t at) {
    return e.empty() ? std::span<const int>{} : std::span<const int>(&e[at], M);
  };
  Model sizes = init;  // (the reference's optimizer learns its layers' tensors from a copy)
  Opt ref_opt = make_optimizer<Opt>(sizes, rule);
  std::vector<double> ref_losses;
  Model ref = reference_run<P, M, V>(init, d, steps, ref_opt, ref_losses, e);

  Model model = init;
  Loss l;
  Opt opt = make_optimizer<Opt>(model, rule);
  exec_t exec(model, l, opt);
  for (int k = 0; k < steps; ++k) {
    const auto at = static_cast<std::size_t>(k * M);
    const ctpipe::token_losses got = exec.step(std::span<const Input>(&d.inputs[at], M),
                                               std::span<const test::target>(&d.targets[at], M), extents_of(at));
    REQUIRE(got.losses.size() == static_cast<std::size_t>(M));
    for (int i = 0; i < M; ++i) {
      CAPTURE(k);
      CAPTURE(i);
      REQUIRE(got.losses[static_cast<std::size_t>(i)] == ref_losses[at + static_cast<std::size_t>(i)]);
      if (!e.empty()) REQUIRE(got.tokens[static_cast<std::size_t>(i)] == e[at + static_cast<std::size_t>(i)]);
    }
    CHECK(exec.microbatches_fed() == (k + 1) * M);
  }
  // Before the drain the model still holds the weights it started from.
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(const_cast<Model&>(init))));
  exec.finish();
  CHECK(exec.microbatches_fed() == 0);
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(ref)));
  exec.finish();  // nothing in flight: does nothing
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(ref)));

  // A second run from the finished weights: the pipeline starts afresh.
  std::vector<double> again_losses;
  const Model again = reference_run<P, M, V>(ref, d, 2, ref_opt, again_losses, e, steps);  // steps go on counting
  for (int k = 0; k < 2; ++k) {
    const auto at = static_cast<std::size_t>(k * M);
    const ctpipe::token_losses got = exec.step(std::span<const Input>(&d.inputs[at], M),
                                               std::span<const test::target>(&d.targets[at], M), extents_of(at));
    for (int i = 0; i < M; ++i)
      REQUIRE(got.losses[static_cast<std::size_t>(i)] == again_losses[at + static_cast<std::size_t>(i)]);
  }
  // Forward only: refused while microbatches are in flight; once drained, on the newest weights,
  // as the sequential forward gives it, touching no weight.
  const auto first_m = [&]<class T>(const std::vector<T>& v) { return std::span<const T>(v.data(), M); };
  const std::string in_flight =
      "ctpipe::async_executor::evaluate: " + std::to_string(2 * M) + " microbatches are in flight";
  CHECK_THROWS_WITH_AS(exec.evaluate(first_m(d.inputs), first_m(d.targets)), doctest::Contains(in_flight.c_str()),
                       std::logic_error);
  exec.finish();
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(const_cast<Model&>(again))));
  Model newest = again;
  std::vector<double> want(M);
  ctpipe::sequential_evaluate(newest, l, first_m(d.inputs), first_m(d.targets), extents_of(0), std::span<double>(want),
                              exec.context_origin());
  const ctpipe::token_losses got = exec.evaluate(first_m(d.inputs), first_m(d.targets), extents_of(0));
  for (int i = 0; i < M; ++i) CHECK(got.losses[static_cast<std::size_t>(i)] == want[static_cast<std::size_t>(i)]);
  using Output = typename Model::output_type;
  std::vector<Output> want_out(M), got_out(M);
  ctpipe::sequential_predict(newest, first_m(d.inputs), extents_of(0), std::span<Output>(want_out),
                             exec.context_origin());
  exec.predict(first_m(d.inputs), got_out, extents_of(0));
  for (int i = 0; i < M; ++i)
    CHECK(std::memcmp(&want_out[static_cast<std::size_t>(i)], &got_out[static_cast<std::size_t>(i)], sizeof(Output)) ==
          0);
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(newest)));
}

// SGD with momentum, state per layer: the order of one layer's updates matters to the bit. The
// ranks call it concurrently for different layers: each layer's state is its own (no shared map).
struct momentum {
  double rate = 0.05, beta = 0.9;
  std::vector<std::vector<float>> velocity = std::vector<std::vector<float>>(test::mlp::size);
  void operator()(std::size_t layer, std::span<float> w, std::span<const float> g) {
    auto& v = velocity[layer];
    v.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      v[i] = static_cast<float>(beta) * v[i] + g[i];
      w[i] -= static_cast<float>(rate) * v[i];
    }
  }
};

}  // namespace

TEST_CASE("async executor, weight stashing: bitwise equal to the sequential staleness rule at p = 1..4") {
  SUBCASE("p = 1") { against_reference<1, 3, weight_versions::stashed>(4); }
  SUBCASE("p = 2") { against_reference<2, 3, weight_versions::stashed>(5); }
  // ctpipe::optimizer with AdamW (state per layer and tensor, each layer's update count its own), at p = 3.
  SUBCASE("p = 3") {
    against_reference<3, 4, weight_versions::stashed, ctpipe::optimizer<test::mlp, ctpipe::adamw>, test::mlp,
                      ctpipe::adamw>(5, ctpipe::adamw{.lr = 0.003});
  }
  SUBCASE("p = 4") { against_reference<4, 3, weight_versions::stashed>(6); }
  // A model with a layer without parameters (its stage keeps no versions of it).
  SUBCASE("p = 2, a layer without parameters") {
    against_reference<2, 3, weight_versions::stashed, ctpipe::sgd, test::relu_mlp>(5);
  }
  // Layers that keep saved state, and dropout: a backward in a later step than its forward draws
  // the forward's mask (the context names the step that fed the microbatch). Residuals: the
  // partition puts layers 0 and 3 on stages 0 and 3, so layer 0's output skips two stages (skip
  // messages numbered across steps, like the neighbours'). Microbatches of mixed lengths. (The
  // sweeps' block_mlp without its tied head: this executor refuses shared parameters.)
  SUBCASE("p = 4, saved state, dropout and a residual that skips stages") {
    static_assert(
        ctpipe::model_crossings<test::untied_block_mlp, ctpipe::partition<test::untied_block_mlp, 4>()>().size() == 1);
    against_reference<4, 3, weight_versions::stashed, ctpipe::sgd, test::untied_block_mlp>(6);
  }
}

TEST_CASE("async executor, PipeDream-2BW: bitwise equal to W(t+1) = W(t) - lr grad f(W(t-1)) at p = 1..4") {
  SUBCASE("p = 1") { against_reference<1, 2, weight_versions::double_buffered>(4); }
  SUBCASE("p = 2") { against_reference<2, 3, weight_versions::double_buffered>(5); }
  // The user's own optimizer, with state per layer (momentum), at p = 3.
  SUBCASE("p = 3") { against_reference<3, 4, weight_versions::double_buffered, momentum>(5, momentum{0.02, 0.9}); }
  SUBCASE("p = 4") { against_reference<4, 3, weight_versions::double_buffered>(6); }
  SUBCASE("p = 3, saved state, dropout and a residual that skips a stage") {
    static_assert(
        ctpipe::model_crossings<test::untied_block_mlp, ctpipe::partition<test::untied_block_mlp, 3>()>().size() == 1);
    against_reference<3, 3, weight_versions::double_buffered, ctpipe::sgd, test::untied_block_mlp>(5);
  }
}

TEST_CASE("async executor: with p = 1, weight stashing is plain SGD, one update per microbatch") {
  constexpr auto stages = ctpipe::partition<test::mlp, 1>();
  test::mlp model = test::make_mlp(), plain = model;
  test::loss l;
  ctpipe::sgd opt{0.05};
  ctpipe::async_executor<ctpipe::pipedream(1, 3), test::mlp, stages, test::loss, ctpipe::sgd> exec(model, l, opt);
  const auto d = test::make_data(12);
  std::vector<double> loss(1);
  for (int k = 0; k < 4; ++k) {
    exec.step(std::span<const test::input>(&d.inputs[static_cast<std::size_t>(3 * k)], 3),
              std::span<const test::target>(&d.targets[static_cast<std::size_t>(3 * k)], 3));
    for (int i = 3 * k; i < 3 * k + 3; ++i) {
      ctpipe::sequential_step(plain, l, std::span<const test::input>(&d.inputs[static_cast<std::size_t>(i)], 1),
                              std::span<const test::target>(&d.targets[static_cast<std::size_t>(i)], 1),
                              std::span<double>(loss));
      ctpipe::sgd_step(plain, 0.05);
    }
  }
  exec.finish();
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(plain)));
}

TEST_CASE("async executor: training lowers the loss (2BW, p = 4, m = 3), recorded or not, bitwise alike") {
  // Recorded (record_steps): the window (the first step, the last before finish() and the drain)
  // with every task once, in order, each receive after its send, the parts end to end; the same
  // parameters as a run that does not record.
  constexpr auto stages = ctpipe::partition<test::mlp, 4>();
  using exec_t = ctpipe::async_executor<ctpipe::pipedream_2bw(4, 3), test::mlp, stages, test::loss, ctpipe::sgd>;
  test::mlp model = test::make_mlp(), plain_model = test::make_mlp();
  test::loss l;
  ctpipe::sgd opt{0.02};
  exec_t exec(model, l, opt), plain(plain_model, l, opt);
  CHECK(exec.recorded_step().ranks.empty());  // off by default
  exec.record_steps(true);
  const auto d = test::make_data(3);
  double first = 0, last = 0;
  for (int k = 0; k < 40; ++k) {
    const auto losses = exec.step(d.inputs, d.targets);
    double mean = 0;
    for (double x : losses) mean += x / static_cast<double>(losses.size());
    (k == 0 ? first : last) = mean;
    plain.step(d.inputs, d.targets);
  }
  exec.finish();
  plain.finish();
  CHECK(last < 0.5 * first);
  CHECK(test::bitwise_equal(test::parameters(model), test::parameters(plain_model)));
  test::check_record(exec_t::table, exec.recorded_step());
  const auto c = ctpipe::compare_measured(exec_t::table, exec.recorded_step());
  CHECK(c.replayed <= c.measured + 1e-9);
  CHECK(c.replayed > 0.0);
}

// ---- memory: the versions and stashes each stage keeps ----------------------------------------
namespace {
constexpr auto stages4 = ctpipe::partition<test::mlp, 4>();
using stash_exec = ctpipe::async_executor<ctpipe::pipedream(4, 3), test::mlp, stages4, test::loss, ctpipe::sgd>;
using twobw_exec = ctpipe::async_executor<ctpipe::pipedream_2bw(4, 3), test::mlp, stages4, test::loss, ctpipe::sgd>;
// Stash depth p - s, from the table's own analysis (the executor asserts the two agree).
static_assert(stash_exec::plan.stash_slots == std::array<int, 4>{4, 3, 2, 1});
static_assert(stash_exec::version_slots == std::array<int, 4>{4, 3, 2, 1});
static_assert(twobw_exec::version_slots == std::array<int, 4>{2, 2, 2, 2});
static_assert(stash_exec::activation_bytes() == twobw_exec::activation_bytes());
static_assert(stash_exec::weight_bytes()[0] == 2 * twobw_exec::weight_bytes()[0]);
static_assert(stash_exec::weight_bytes()[3] * 2 == twobw_exec::weight_bytes()[3]);
}  // namespace

// ---- failures -----------------------------------------------------------------------------------
namespace {
using first_dense = test::dense<test::batch, test::features, test::hidden>;
using dense_mid = test::dense<test::batch, test::hidden, test::hidden>;
constexpr float poison = 1.0e30f;
// Throws in its forward where the input carries the poison value.
struct poisoned : first_dense {
  void forward(const input_type& x, output_type& y) const {
    if (x(0, 0) == poison) throw std::runtime_error("poisoned input");
    first_dense::forward(x, y);
  }
};
using poison_net = ctpipe::model<poisoned, dense_mid, dense_mid,
                                 test::dense<test::batch, test::hidden, test::classes, test::activation::none>>;
constexpr auto poison_stages = ctpipe::partition<poison_net, 2>();

poison_net make_poison_net() {
  poison_net m;
  std::uint64_t k = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(k++); });
  return m;
}

// Throws on its n-th call (the ranks call it concurrently: the count is atomic).
struct failing_opt {
  int throw_at = -1;
  std::atomic<int> calls{0};
  failing_opt() = default;
  explicit failing_opt(int at) : throw_at(at) {}
  void operator()(std::size_t layer, std::span<float> w, std::span<const float> g) {
    if (calls++ == throw_at) throw std::runtime_error("optimizer fault");
    ctpipe::sgd{0.05}(layer, w, g);
  }
};
using poison_exec = ctpipe::async_executor<ctpipe::pipedream(2, 3), poison_net, poison_stages, test::loss, failing_opt>;

// Losses of `steps` steps of a fresh pipeline from `init`, through a second executor.
std::vector<double> fresh_losses(const poison_net& init, const test::data_set& d, int steps) {
  poison_net m = init;
  test::loss l;
  failing_opt opt;
  poison_exec exec(m, l, opt);
  std::vector<double> out;
  for (int k = 0; k < steps; ++k) {
    const auto x = exec.step(std::span<const test::input>(&d.inputs[static_cast<std::size_t>(3 * k)], 3),
                             std::span<const test::target>(&d.targets[static_cast<std::size_t>(3 * k)], 3));
    out.insert(out.end(), x.begin(), x.end());
  }
  return out;
}
}  // namespace

TEST_CASE("async executor: a failing forward names the rank, stage and microbatch, the pipeline starts afresh") {
  const poison_net init = make_poison_net();
  poison_net m = init;
  test::loss l;
  failing_opt opt;
  poison_exec exec(m, l, opt);
  const auto clean = test::make_data(6);
  auto bad = clean;
  bad.inputs[4](0, 0) = poison;  // microbatch 4: step 1, place 1
  exec.step(std::span<const test::input>(&bad.inputs[0], 3), std::span<const test::target>(&bad.targets[0], 3));
  try {
    exec.step(std::span<const test::input>(&bad.inputs[3], 3), std::span<const test::target>(&bad.targets[3], 3));
    FAIL("step() did not throw");
  } catch (const ctpipe::task_failure& e) {
    CHECK(std::string(e.what()) ==
          "ctpipe::async_executor: rank 0, stage 0, microbatch 4, op F failed: poisoned input");
    CHECK(e.microbatch() == 4);
  }
  CHECK(exec.microbatches_fed() == 0);
  // Afresh, from the model's weights (no finish() ran: the initial ones).
  const auto expected = fresh_losses(init, clean, 2);
  std::vector<double> got;
  for (int k = 0; k < 2; ++k) {
    const auto x = exec.step(std::span<const test::input>(&clean.inputs[static_cast<std::size_t>(3 * k)], 3),
                             std::span<const test::target>(&clean.targets[static_cast<std::size_t>(3 * k)], 3));
    got.insert(got.end(), x.begin(), x.end());
  }
  CHECK(got == expected);
  exec.finish();
}

TEST_CASE("async executor: a failing optimizer fails the backward it follows") {
  poison_net m = make_poison_net();
  test::loss l;
  // Step 0 updates 4 layer-times on stage 0 (B(0), B(1): layers 0, 1) and 6 on stage 1: the 13th
  // call is in step 1.
  failing_opt opt(12);
  poison_exec exec(m, l, opt);
  const auto d = test::make_data(6);
  exec.step(std::span<const test::input>(&d.inputs[0], 3), std::span<const test::target>(&d.targets[0], 3));
  try {
    exec.step(std::span<const test::input>(&d.inputs[3], 3), std::span<const test::target>(&d.targets[3], 3));
    exec.finish();
    FAIL("the optimizer's failure did not end a step");
  } catch (const ctpipe::task_failure& e) {
    CHECK(e.op() == ctpipe::op_kind::backward);
    CHECK(std::string(e.what()).find("optimizer fault") != std::string::npos);
  }
}

TEST_CASE("async executor: a step with the wrong number of microbatches is refused") {
  poison_net m = make_poison_net();
  test::loss l;
  failing_opt opt;
  poison_exec exec(m, l, opt);
  const auto d = test::make_data(4);
  CHECK_THROWS_WITH_AS(exec.step(d.inputs, d.targets),
                       "ctpipe::async_executor::step: inputs (4) and targets (4) must each hold 3 microbatches, as "
                       "the table does",
                       std::invalid_argument);
}
