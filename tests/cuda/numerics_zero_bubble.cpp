// The simulated CUDA executor against the sequential reference, split backward on loop placement:
// ZB-H1, ZB-H2 and interleaved zero bubble, p = 1..4, with a model whose layers mostly split their
// backward (I runs backward_input, W backward_weight) and two that do not.
#include "support/sim_numerics.hpp"

using split_mlp = test::device::split_token_block_mlp;
// p = 3 and 4 walk the table (sim_numerics.hpp, every_placement).
constexpr auto walk = ctpipe::dispatch::table_walk;

TEST_CASE("cuda executor (simulated): zb_h1 p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { test::device::every_placement<ctpipe::zb_h1(1, 3), split_mlp>(); }
  SUBCASE("p=2") { test::device::every_placement<ctpipe::zb_h1(2, 4), split_mlp>(); }
  SUBCASE("p=3") { test::device::every_placement<ctpipe::zb_h1(3, 6), split_mlp, walk>(); }
  SUBCASE("p=4") { test::device::every_placement<ctpipe::zb_h1(4, 8), split_mlp, walk>(); }
}
TEST_CASE("cuda executor (simulated): zb_h2 p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { test::device::every_placement<ctpipe::zb_h2(1, 3), split_mlp>(); }
  SUBCASE("p=2") { test::device::every_placement<ctpipe::zb_h2(2, 4), split_mlp>(); }
  SUBCASE("p=3") { test::device::every_placement<ctpipe::zb_h2(3, 6), split_mlp, walk>(); }
  SUBCASE("p=4") { test::device::every_placement<ctpipe::zb_h2(4, 8), split_mlp, walk>(); }
}
TEST_CASE("cuda executor (simulated): interleaved_zero_bubble v=2 p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { test::device::every_placement<ctpipe::interleaved_zero_bubble(1, 4, 2), split_mlp>(); }
  SUBCASE("p=2") { test::device::every_placement<ctpipe::interleaved_zero_bubble(2, 4, 2), split_mlp>(); }
  SUBCASE("p=3") { test::device::every_placement<ctpipe::interleaved_zero_bubble(3, 6, 2), split_mlp, walk>(); }
  SUBCASE("p=4") { test::device::every_placement<ctpipe::interleaved_zero_bubble(4, 8, 2), split_mlp, walk>(); }
}
