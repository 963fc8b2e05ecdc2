// V-Min and V-Half (V placement, split backward, the orders of the controllable-memory scheduler)
// train the MLP with gradients equal to the bit to the sequential run: p = 2 and 4 each, walked.
#include "support/numerics.hpp"

namespace {
template <auto Schedule>
void check_v_memory() {
  constexpr auto stages = test::even_stages<test::block_mlp, Schedule.stages()>();
  constexpr auto table = test::table_for<Schedule, test::block_mlp, stages>();
  test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::block_mlp>();
}
}  // namespace

TEST_CASE("host executor: v_min p=2 and p=4 match sequential training bitwise") {
  SUBCASE("p=2") { check_v_memory<ctpipe::v_min(2, test::microbatches)>(); }
  SUBCASE("p=4") { check_v_memory<ctpipe::v_min(4, test::microbatches)>(); }
}
TEST_CASE("host executor: v_half p=2 and p=4 match sequential training bitwise") {
  SUBCASE("p=2") { check_v_memory<ctpipe::v_half(2, test::microbatches)>(); }
  SUBCASE("p=4") { check_v_memory<ctpipe::v_half(4, test::microbatches)>(); }
}
