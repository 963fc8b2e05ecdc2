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

// Trains two copies of the same model side by side (the MLP with state-saving layers and dropout,
// unless told; the numerics sweeps give it residuals: test::block_mlp), one sequentially and one through the executor
// for Table with stage plan Plan, for `steps` SGD steps (the executor numbers them from 0, as the reference is told).
// Every step: losses and gradients must be equal to the bit. At the end the loss must have fallen.
template <auto Table, auto Plan, ctpipe::dispatch Dispatch = ctpipe::dispatch::unrolled, class Model = stateful_mlp>
void train_against_sequential(int steps = 50, double rate = 0.02) {
  Model seq = make_mlp<Model>(), pipe = make_mlp<Model>();
  loss l;
  const data_set d = make_data(Table.params.microbatches);
  std::vector<double> seq_losses(d.inputs.size());
  ctpipe::host_executor<Table, Model, Plan, loss, Dispatch> exec(pipe, l);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < steps; ++step) {
    ctpipe::sequential_step(seq, l, std::span<const input>(d.inputs), std::span<const target>(d.targets),
                            std::span<double>(seq_losses), {static_cast<std::uint64_t>(step), 0});
    const auto pipe_losses = exec.step(d.inputs, d.targets);
    REQUIRE(pipe_losses.size() == seq_losses.size());
    for (std::size_t i = 0; i < seq_losses.size(); ++i) REQUIRE(pipe_losses[i] == seq_losses[i]);
    REQUIRE(bitwise_equal(gradients(seq), gradients(pipe)));
    double total = 0.0;
    for (double x : pipe_losses) total += x;
    if (step == 0) first = total / static_cast<double>(pipe_losses.size());
    last = total / static_cast<double>(pipe_losses.size());
    ctpipe::sgd_step(seq, rate);
    ctpipe::sgd_step(pipe, rate);
  }
  CHECK(bitwise_equal(parameters(seq), parameters(pipe)));
  if (steps >= 20) CHECK(last < 0.5 * first);  // short runs check the bits only
}

}  // namespace test

// The four test cases of one schedule (one source file per schedule, so the build spreads over
// the cores): p = 1..4, test::block_mlp (the stateful MLP with two residuals) in stages of equal
// layer counts, whose residuals cross stage boundaries (at 6 and 8 stages they skip whole stages:
// skip messages, between ranks or within one), 50 SGD steps against the reference, with
// each dispatch strategy (unrolled, then table walk) at p = 1 and 2, and the table walk at p = 3
// and 4. The two strategies run the same task code (exec/detail/run.hpp); unrolling the larger
// tables cost most of the executor tests' compile time, in four builds of CI.
#define CTPIPE_NUMERICS_TESTS(kind, ...)                                                               \
  namespace {                                                                                          \
  template <int P>                                                                                     \
  void check_##kind() {                                                                                \
    constexpr auto schedule = ctpipe::kind(P, test::microbatches __VA_ARGS__);                         \
    constexpr auto stages = test::even_stages<test::block_mlp, schedule.stages()>();                   \
    constexpr auto table = test::table_for<schedule, test::block_mlp, stages>();                       \
    if constexpr (P <= 2) {                                                                            \
      SUBCASE("unrolled") {                                                                            \
        test::train_against_sequential<table, stages, ctpipe::dispatch::unrolled, test::block_mlp>();  \
      }                                                                                                \
    }                                                                                                  \
    SUBCASE("table walk") {                                                                            \
      test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::block_mlp>();  \
    }                                                                                                  \
  }                                                                                                    \
  }                                                                                                    \
  TEST_CASE("host executor: " #kind " p=1 matches sequential training bitwise") { check_##kind<1>(); } \
  TEST_CASE("host executor: " #kind " p=2 matches sequential training bitwise") { check_##kind<2>(); } \
  TEST_CASE("host executor: " #kind " p=3 matches sequential training bitwise") { check_##kind<3>(); } \
  TEST_CASE("host executor: " #kind " p=4 matches sequential training bitwise") { check_##kind<4>(); }
