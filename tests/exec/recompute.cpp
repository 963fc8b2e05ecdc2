// Activation recomputation: gradients stay equal to the bit, activation memory drops.
#include "support/numerics.hpp"

namespace {
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(4, test::microbatches)>();
constexpr auto stages = ctpipe::partition<test::mlp, 4>();
constexpr auto all = stages.recompute_all();
constexpr auto first_only = stages.with_recompute(0);
using plain_exec = ctpipe::host_executor<table, test::mlp, stages, test::loss>;
using all_exec = ctpipe::host_executor<table, test::mlp, all, test::loss>;
using first_exec = ctpipe::host_executor<table, test::mlp, first_only, test::loss>;

// GPipe keeps all 12 microbatches of a stage alive: 12 stashes of 3 tensors (input, hidden, output
// of its two layers) against 12 inputs plus one working set when recomputing.
constexpr std::size_t act = sizeof(test::input), mid = sizeof(ctpipe::layers::matrix<test::batch, test::hidden>);
static_assert(plain_exec::activation_bytes()[0] == 12 * (act + 2 * mid));
static_assert(all_exec::activation_bytes()[0] == 12 * act + (act + 2 * mid));
static_assert(all_exec::activation_bytes()[0] < plain_exec::activation_bytes()[0] / 3);
static_assert(all_exec::activation_bytes()[3] < plain_exec::activation_bytes()[3]);
static_assert(first_exec::activation_bytes()[0] == all_exec::activation_bytes()[0]);
static_assert(first_exec::activation_bytes()[1] == plain_exec::activation_bytes()[1]);
}  // namespace

TEST_CASE("host executor: recomputing every stage keeps gradients bitwise and cuts activation bytes") {
  test::train_against_sequential<table, all>();
  for (int r = 0; r < 4; ++r) {
    const auto with = all_exec::activation_bytes()[static_cast<std::size_t>(r)];
    const auto without = plain_exec::activation_bytes()[static_cast<std::size_t>(r)];
    MESSAGE("rank " << r << ": " << without << " bytes without recomputation, " << with << " with");
    CHECK(with < without);
  }
}

TEST_CASE("host executor: recomputation on one stage only, 1F1B and interleaved") {
  test::train_against_sequential<table, first_only>(3);
  constexpr auto t1 = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
  test::train_against_sequential<t1, ctpipe::partition<test::stateful_mlp, 2>().with_recompute(1)>(3);
  constexpr auto ti = ctpipe::make_table<ctpipe::interleaved(2, test::microbatches, 2)>();
  test::train_against_sequential<ti, ctpipe::partition<test::stateful_mlp, 4>().recompute_all()>(3);
  // p = 1 with two chunks: the stages hand over on the same rank.
  constexpr auto tp1 = ctpipe::make_table<ctpipe::interleaved(1, test::microbatches, 2)>();
  test::train_against_sequential<tp1, ctpipe::partition<test::stateful_mlp, 2>().with_recompute(0)>(3);
}

TEST_CASE("host executor: explicit stage bounds") {
  constexpr auto bounds = ctpipe::stage_bounds<test::mlp, 0, 1, 5, 8>();
  constexpr auto t = ctpipe::make_table<ctpipe::one_f_one_b(3, test::microbatches)>();
  test::train_against_sequential<t, bounds>(3);
}

TEST_CASE("host executor: recomputation with split backward (I and W each recompute the stage)") {
  constexpr auto th1 = ctpipe::make_table<ctpipe::zb_h1(2, test::microbatches)>();
  test::train_against_sequential<th1, ctpipe::partition<test::stateful_mlp, 2>().recompute_all()>(3);
  constexpr auto tv = ctpipe::make_table<ctpipe::zb_v(2, test::microbatches)>();
  test::train_against_sequential<tv, ctpipe::partition<test::stateful_mlp, 4>().with_recompute(1)>(3);
  // ZB-H1 keeps p = 2 stashes a rank; each holds the stage's activations and, from I to W, its gradients.
  using split_exec = ctpipe::host_executor<th1, test::mlp, ctpipe::partition<test::mlp, 2>(), test::loss>;
  constexpr std::size_t full = sizeof(test::input) + 4 * mid;  // input and 4 hidden outputs of 4 layers
  static_assert(split_exec::plan.stash_slots[0] == 2);
  static_assert(split_exec::activation_bytes()[0] == 2 * 2 * full);
}
