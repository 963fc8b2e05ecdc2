// The simulated CUDA executor against the sequential reference, on V placement: ZB-V (I and W, the
// V turn handed over on one rank) and DualPipeV (B mixed with I and W, and overlapped pairs F&B whose
// B runs on the rank's second stream), p = 1..4.
#include "support/sim_numerics.hpp"

using split_mlp = test::device::split_token_block_mlp;
// p = 3 and 4 walk the table (sim_numerics.hpp, every_placement).
constexpr auto walk = ctpipe::dispatch::table_walk;

TEST_CASE("cuda executor (simulated): zb_v p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { test::device::every_placement<ctpipe::zb_v(1, 3), split_mlp>(); }
  SUBCASE("p=2") { test::device::every_placement<ctpipe::zb_v(2, 4), split_mlp>(); }
  SUBCASE("p=3") { test::device::every_placement<ctpipe::zb_v(3, 6), split_mlp, walk>(); }
  SUBCASE("p=4") { test::device::every_placement<ctpipe::zb_v(4, 8), split_mlp, walk>(); }
}
TEST_CASE("cuda executor (simulated): dualpipe_v p=1, 3, 4 matches sequential training bitwise") {
  SUBCASE("p=1") { test::device::every_placement<ctpipe::dualpipe_v(1, 2), split_mlp>(); }
  // p = 2: tests/cuda/split.cpp (built under the sanitizers too).
  SUBCASE("p=3") { test::device::every_placement<ctpipe::dualpipe_v(3, 6), split_mlp, walk>(); }
  SUBCASE("p=4") { test::device::every_placement<ctpipe::dualpipe_v(4, 8), split_mlp, walk>(); }
}
TEST_CASE("cuda executor (simulated): dualpipe_v p=2 with a model that does not split matches bitwise") {
  test::device::every_placement<ctpipe::dualpipe_v(2, 4)>();  // every I runs a whole backward
}
TEST_CASE("cuda executor (simulated): v_half p=4 and v_min p=3 match sequential training bitwise") {
  SUBCASE("v_half p=4") { test::device::every_placement<ctpipe::v_half(4, 8), split_mlp, walk>(); }
  SUBCASE("v_min p=3") { test::device::every_placement<ctpipe::v_min(3, 6), split_mlp, walk>(); }
}
