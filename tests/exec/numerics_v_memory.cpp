// The schedules for a memory budget train the MLP with gradients equal to the bit to the sequential
// run, walked: V-Min and V-Half at p = 2 and 4 (V placement, the controllable-memory orders), and
// schedules synthesised at compile time for a user's own costs (the heuristic's order, and the
// better-of under a tight limit; one stage a rank, and V placement).
#include "support/numerics.hpp"

namespace {
template <auto Schedule>
void check_budget() {
  constexpr auto stages = test::even_stages<test::block_mlp, Schedule.stages()>();
  constexpr auto table = test::table_for<Schedule, test::block_mlp, stages>();
  test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::block_mlp>();
}
// A heavy third stage and message latency.
constexpr ctpipe::synthesis_costs user_costs = [] {
  auto c = ctpipe::synthesis_costs::uniform(2, 3, 1, 1);
  c.stage[2] = {4, 5, 2};
  return c;
}();
}  // namespace

TEST_CASE("host executor: v_min p=2 and p=4 match sequential training bitwise") {
  SUBCASE("p=2") { check_budget<ctpipe::v_min(2, test::microbatches)>(); }
  SUBCASE("p=4") { check_budget<ctpipe::v_min(4, test::microbatches)>(); }
}
TEST_CASE("host executor: v_half p=2 and p=4 match sequential training bitwise") {
  SUBCASE("p=2") { check_budget<ctpipe::v_half(2, test::microbatches)>(); }
  SUBCASE("p=4") { check_budget<ctpipe::v_half(4, test::microbatches)>(); }
}
TEST_CASE("host executor: schedules synthesised for a user's costs match sequential training bitwise") {
  SUBCASE("the heuristic's own, p=4, 4 activations a rank") {
    check_budget<ctpipe::synthesise_heuristic(4, test::microbatches, user_costs, 4)>();
  }
  SUBCASE("the better-of, p=3, 2 activations a rank") {
    check_budget<ctpipe::synthesise(3, test::microbatches, user_costs, 2)>();
  }
  SUBCASE("V placement, the heuristic's own, p=2, 4 activations of a stage a rank") {
    check_budget<ctpipe::synthesise_heuristic(2, test::microbatches, user_costs, 4, ctpipe::synthesis_placement::v)>();
  }
}
