// The NCCL executor's simulated sweep (numerics.cpp says how it runs), continued: the
// split-backward schedules (I and W, the V turn, overlapped pairs F&B; V-Half's order).
#include "support/nccl_numerics.hpp"

using split_mlp = test::device::split_token_block_mlp;
using test::nccl::every_way;
// Most tables walk (the task code is the same either way; unrolling costs compile time): DualPipeV
// p = 2 unrolls.
constexpr auto walk = ctpipe::dispatch::table_walk;

TEST_CASE("nccl executor (simulated): split backward matches sequential training bitwise") {
  SUBCASE("zb_h1 p=2") { every_way<ctpipe::zb_h1(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_h2 p=2") { every_way<ctpipe::zb_h2(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_v p=2") { every_way<ctpipe::zb_v(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_v p=4") { every_way<ctpipe::zb_v(4, 8), split_mlp, walk>(); }
  SUBCASE("v_half p=4") { every_way<ctpipe::v_half(4, 8), split_mlp, walk>(); }
  SUBCASE("interleaved_zero_bubble p=2") { every_way<ctpipe::interleaved_zero_bubble(2, 4, 2), split_mlp, walk>(); }
  SUBCASE("dualpipe_v p=2") { every_way<ctpipe::dualpipe_v(2, 4), split_mlp>(); }
  SUBCASE("dualpipe_v p=4") { every_way<ctpipe::dualpipe_v(4, 8), split_mlp, walk>(); }
}
