// Shared body of the numerics tests: a schedule's pipeline against the sequential reference.
#pragma once
#include "mlp.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <span>

namespace test {

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The update the sweeps train with: AdamW, clipped at a global norm that the first steps exceed
// and the later ones do not (the norm falls from hundreds to below 0.1 within 20 steps).
inline constexpr ctpipe::adamw sweep_rule{.lr = 0.003};
inline constexpr ctpipe::clipping sweep_clip{.max_norm = 1.0};

// Two optimizers' steps, one of each copy of a model, must agree: both applied or both skipped, the
// same global norm and scale to the bit. Counts the steps that clipped.
inline void same_update(const ctpipe::update_result& a, const ctpipe::update_result& b, int& clipped) {
  REQUIRE(a.applied == b.applied);
  REQUIRE(std::memcmp(&a.norm, &b.norm, sizeof(double)) == 0);
  REQUIRE(a.scale == b.scale);
  clipped += a.scale < 1.0 ? 1 : 0;
}

// Steps [from, to) of a run over `data` (the model's microbatches of mixed lengths, new ones every
// step, where it has extents), with `opt` after each: through `exec`, whose steps must stand at
// `from`, or sequentially where exec is null (Exec still names a type). Every update must apply.
template <class Exec, class Model, class Opt, class Data>
void train_steps(Exec* exec, Model& model, Opt& opt, const Data& data, int from, int to) {
  using Input = typename Model::input_type;
  loss_for<Model> l;
  const auto n = data.inputs.size();
  std::vector<double> losses(n);
  for (int step = from; step < to; ++step) {
    const std::vector<int> e =
        Model::token_capacity > 0 ? extents(static_cast<int>(n), static_cast<std::uint64_t>(step)) : std::vector<int>{};
    if (exec != nullptr) {
      REQUIRE(exec->context_origin().step == static_cast<std::uint64_t>(step));
      exec->step(data.inputs, data.targets, e);
    } else {
      ctpipe::sequential_step(model, l, std::span<const Input>(data.inputs), std::span<const target>(data.targets),
                              std::span<const int>(e), std::span<double>(losses),
                              {static_cast<std::uint64_t>(step), 0});
    }
    REQUIRE(opt.step().applied);
  }
}

// Forward only, on two copies of a model with the same parameters: `exec` (whose training steps
// stand at `step`) evaluates and predicts `d` (with extents for that step, where the model has
// them) through its forward-only table, equal to the bit to the sequential forward pass of `seq`,
// and leaves the gradients of `pipe` (its model) as they were.
template <class Exec, class Model, class Loss, class Data>
void forward_against_sequential(Exec& exec, Model& seq, Model& pipe, Loss& l, const Data& d, std::uint64_t step) {
  using Input = typename Model::input_type;
  using Output = typename Model::output_type;
  const int m = static_cast<int>(d.inputs.size());
  const std::vector<int> e = Model::token_capacity > 0 ? extents(m, step) : std::vector<int>{};
  const std::vector<float> before = gradients(pipe);
  std::vector<double> want(d.inputs.size());
  ctpipe::sequential_evaluate(seq, l, std::span<const Input>(d.inputs), std::span<const target>(d.targets),
                              std::span<const int>(e), std::span<double>(want), {step, 0});
  const ctpipe::token_losses got = exec.evaluate(d.inputs, d.targets, e);
  REQUIRE(got.losses.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got.losses[i] == want[i]);
  if constexpr (Model::token_capacity > 0)
    for (std::size_t i = 0; i < e.size(); ++i) REQUIRE(got.tokens[i] == e[i]);
  std::vector<Output> want_out(d.inputs.size()), got_out(d.inputs.size());
  ctpipe::sequential_predict(seq, std::span<const Input>(d.inputs), std::span<const int>(e),
                             std::span<Output>(want_out), {step, 0});
  exec.predict(d.inputs, got_out, e);
  for (std::size_t i = 0; i < want_out.size(); ++i)
    REQUIRE(std::memcmp(&want_out[i], &got_out[i], sizeof(Output)) == 0);
  REQUIRE(bitwise_equal(before, gradients(pipe)));
  REQUIRE(exec.context_origin().step == step);  // no training step of its own
}

// Trains two copies of the same model side by side (the MLP with state-saving layers and dropout,
// unless told; the numerics sweeps give it residuals and run-time extents: test::block_mlp), one sequentially and one
// through the executor for Table with stage plan Plan, for `steps` steps of ctpipe::optimizer with Rule and clipping
// (the executor numbers them from 0, as the reference is told). A model with extents gets microbatches of mixed lengths
// (test::extents, new ones every step). Every step: losses, tokens, gradients and the optimizers' norms must be equal
// to the bit. At the end the loss must have fallen, and on the sweeps' model the clipping must have both triggered
// and not; then evaluate() and predict() on the trained parameters (forward_against_sequential).
template <auto Table, auto Plan, ctpipe::dispatch Dispatch = ctpipe::dispatch::unrolled, class Model = stateful_mlp,
          class Rule = ctpipe::adamw>
void train_against_sequential(int steps = 50, Rule rule = sweep_rule, ctpipe::clipping clip = sweep_clip) {
  using Loss = loss_for<Model>;
  using Input = typename Model::input_type;
  constexpr bool with_extents = Model::token_capacity > 0;
  Model seq = make_mlp<Model>(), pipe = make_mlp<Model>();
  Loss l;
  const auto d = make_data<Input>(Table.params.microbatches);
  std::vector<double> seq_losses(d.inputs.size());
  ctpipe::host_executor<Table, Model, Plan, Loss, Dispatch> exec(pipe, l);
  ctpipe::optimizer seq_opt(seq, rule, clip), pipe_opt(pipe, rule, clip);
  double first = 0.0, last = 0.0;
  int clipped = 0;
  for (int step = 0; step < steps; ++step) {
    const std::vector<int> e =
        with_extents ? extents(Table.params.microbatches, static_cast<std::uint64_t>(step)) : std::vector<int>{};
    if constexpr (ctpipe::directions_of(Table) == 1)
      ctpipe::sequential_step(seq, l, std::span<const Input>(d.inputs), std::span<const target>(d.targets),
                              std::span<const int>(e), std::span<double>(seq_losses),
                              {static_cast<std::uint64_t>(step), 0});
    else  // dualpipe: each pipeline's half of the microbatches, then the first half's sum plus the second's
      seq_losses = reference_step(seq, l, d, 1, Table.params.microbatches, static_cast<std::uint64_t>(step), e, 2);
    const ctpipe::token_losses got = exec.step(d.inputs, d.targets, e);
    REQUIRE(got.losses.size() == seq_losses.size());
    for (std::size_t i = 0; i < seq_losses.size(); ++i) REQUIRE(got.losses[i] == seq_losses[i]);
    if constexpr (with_extents)
      for (std::size_t i = 0; i < e.size(); ++i) REQUIRE(got.tokens[i] == e[i]);
    REQUIRE(bitwise_equal(gradients(seq), gradients(pipe)));
    double total = 0.0;
    for (double x : got.losses) total += x;
    const double mean = with_extents ? got.per_token() : total / static_cast<double>(got.losses.size());
    if (step == 0) first = mean;
    last = mean;
    same_update(seq_opt.step(), pipe_opt.step(), clipped);
  }
  CHECK(bitwise_equal(parameters(seq), parameters(pipe)));
  // (An unrolled sweep of the sweeps' model leaves the forward pass to its table-walk twin, which
  // runs the same task code: exec/detail/run.hpp. Unrolled, it would cost a second large program.)
  if constexpr (Dispatch != ctpipe::dispatch::unrolled || !std::is_same_v<Model, block_mlp>)
    forward_against_sequential(exec, seq, pipe, l, d, static_cast<std::uint64_t>(steps));
  if (steps >= 20) CHECK(last < 0.5 * first);      // short runs check the bits only
  if constexpr (std::is_same_v<Model, block_mlp>)  // the sweeps' model: clipped early, not late
    if (steps >= 20 && clip.max_norm == sweep_clip.max_norm) CHECK((clipped > 0 && clipped < steps));
}

}  // namespace test

// The sanitizer builds and the lean clang build (CTPIPE_SANITIZE and CTPIPE_LEAN_TESTS define
// CTPIPE_SHORT_SWEEP) run each schedule's sweep at p = 2 and 4, through the table walk: the task
// code, the channels and the rank threads that ASan and TSan watch, and that clang compiles, are
// the same at every depth and in both strategies (exec/detail/run.hpp), and the g++ build runs the
// whole sweep. A third of the instantiations: the sweep was most of those builds' compile time.
namespace test {
#if defined(CTPIPE_SHORT_SWEEP)
inline constexpr bool short_sweep = true;
#else
inline constexpr bool short_sweep = false;
#endif
}  // namespace test

// The four test cases of one schedule (one source file per schedule, so the build spreads over
// the cores): p = 1..4, test::block_mlp (the stateful MLP with two residuals, over microbatches
// of mixed lengths) in stages of equal layer counts, whose residuals cross stage boundaries (at 6
// and 8 stages they skip whole stages: skip messages, between ranks or within one), 50 clipped
// AdamW steps against the reference, with each dispatch strategy (unrolled, then table walk) at
// p = 1 and 2, and the table walk at p = 3 and 4 (the sanitizer and clang builds: see above). The two
// strategies run the same task code (exec/detail/run.hpp); unrolling the larger tables cost most
// of the executor tests' compile time, in four builds of CI.
#define CTPIPE_NUMERICS_TESTS(kind, ...)                                                                \
  namespace {                                                                                           \
  template <int P>                                                                                      \
  void check_##kind() {                                                                                 \
    if constexpr (test::short_sweep && P % 2 != 0) {                                                    \
      MESSAGE("this build runs the sweep at p = 2 and 4; the g++ build runs this depth");               \
    } else {                                                                                            \
      constexpr auto schedule = ctpipe::kind(P, test::microbatches __VA_ARGS__);                        \
      constexpr auto stages = test::even_stages<test::block_mlp, schedule.stages()>();                  \
      constexpr auto table = test::table_for<schedule, test::block_mlp, stages>();                      \
      if constexpr (P <= 2 && !test::short_sweep) {                                                     \
        SUBCASE("unrolled") {                                                                           \
          test::train_against_sequential<table, stages, ctpipe::dispatch::unrolled, test::block_mlp>(); \
        }                                                                                               \
      }                                                                                                 \
      SUBCASE("table walk") {                                                                           \
        test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::block_mlp>(); \
      }                                                                                                 \
    }                                                                                                   \
  }                                                                                                     \
  }                                                                                                     \
  TEST_CASE("host executor: " #kind " p=1 matches sequential training bitwise") { check_##kind<1>(); }  \
  TEST_CASE("host executor: " #kind " p=2 matches sequential training bitwise") { check_##kind<2>(); }  \
  TEST_CASE("host executor: " #kind " p=3 matches sequential training bitwise") { check_##kind<3>(); }  \
  TEST_CASE("host executor: " #kind " p=4 matches sequential training bitwise") { check_##kind<4>(); }
