// After warm-up an MPI executor's step allocates nothing (operator new is counted in this program;
// MPI's own buffers are MPI's business).
#include <ctpipe/mpi.hpp>

#include <doctest/doctest.h>

#include "support/counted_new.hpp"
#include "support/mlp.hpp"

namespace {
template <auto Schedule>
long allocations_per_step() {
  constexpr auto table = ctpipe::make_table<Schedule>();
  auto m = test::make_mlp();
  test::loss l;
  const auto d = test::make_data(table.params.microbatches);
  ctpipe::mpi::executor<table, test::mlp, ctpipe::partition<test::mlp, table.stages()>(), test::loss> exec(m, l);
  exec.step(d.inputs, d.targets);  // warm-up
  exec.step(d.inputs, d.targets);
  const long before = test::allocations.load();
  for (int i = 0; i < 5; ++i) exec.step(d.inputs, d.targets);
  return test::allocations.load() - before;
}
// The sweeps' model with extents (packed messages, skip messages between processes), microbatches
// of mixed lengths, new ones every step.
template <auto Schedule>
long allocations_per_step_with_extents() {
  constexpr auto stages = test::even_stages<test::block_mlp, Schedule.stages()>();
  constexpr auto table = test::table_for<Schedule, test::block_mlp, stages>();
  constexpr int m = table.params.microbatches;
  auto model = test::make_mlp<test::block_mlp>();
  test::loss_for<test::block_mlp> l;
  const auto d = test::make_data<test::block_mlp::input_type>(m);
  ctpipe::mpi::executor<table, test::block_mlp, stages, test::loss_for<test::block_mlp>> exec(model, l);
  std::vector<std::vector<int>> e;
  for (int i = 0; i < 7; ++i) e.push_back(test::extents(m, static_cast<std::uint64_t>(i)));
  exec.step(d.inputs, d.targets, e[0]);  // warm-up
  exec.step(d.inputs, d.targets, e[1]);
  const long before = test::allocations.load();
  for (int i = 0; i < 5; ++i) exec.step(d.inputs, d.targets, e[static_cast<std::size_t>(2 + i)]);
  return test::allocations.load() - before;
}
}  // namespace

TEST_SUITE("np2") {
  TEST_CASE("mpi executor: a step allocates nothing after warm-up (P = 2)") {
    const long setup_before = test::allocations.load();
    CHECK(allocations_per_step<ctpipe::one_f_one_b(2, 8)>() == 0);
    CHECK(test::allocations.load() > setup_before);  // the counter counts: construction allocates
    CHECK(allocations_per_step<ctpipe::zb_v(2, 8)>() == 0);
    CHECK(allocations_per_step<ctpipe::interleaved(2, 8, 2)>() == 0);
    CHECK(allocations_per_step_with_extents<ctpipe::one_f_one_b(2, 8)>() == 0);
  }
}
TEST_SUITE("np4") {
  TEST_CASE("mpi executor: a step allocates nothing after warm-up (D = 2 x P = 2: gradient sums)") {
    CHECK(allocations_per_step<ctpipe::one_f_one_b(2, 8)>() == 0);
    CHECK(allocations_per_step<ctpipe::zb_v(2, 8)>() == 0);
  }
}
