// The NCCL executor on the stream simulator and the NCCL stand-in (nccl_sim.hpp): every schedule
// the executors run, one simulated process per rank, bitwise against sequential training, eager and
// graph steps, three interleavings each. P = 1..4 for 1F1B; the others at the sizes that exercise
// what is theirs (two boundaries between one pair of ranks in interleaved, the V turn on one rank in
// ZB-V and DualPipeV, I and W, overlapped pairs F&B).
#include "support/nccl_numerics.hpp"

using split_mlp = test::device::split_block_mlp;
using test::nccl::every_way;
// Most tables walk (the task code is the same either way; unrolling costs compile time): 1F1B p = 2,
// interleaved with groups of 4, DualPipeV p = 2 and the D = 2 runs of 1F1B unroll.
constexpr auto walk = ctpipe::dispatch::table_walk;
using mlp = test::device::block_mlp;

TEST_CASE("nccl executor (simulated): 1F1B p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { every_way<ctpipe::one_f_one_b(1, 4), mlp, walk>(); }
  SUBCASE("p=2") { every_way<ctpipe::one_f_one_b(2, 4)>(); }
  SUBCASE("p=3") { every_way<ctpipe::one_f_one_b(3, 6), mlp, walk>(); }
  SUBCASE("p=4") { every_way<ctpipe::one_f_one_b(4, 8), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): naive and GPipe p=2 match sequential training bitwise") {
  SUBCASE("naive") { every_way<ctpipe::naive(2, 3), mlp, walk>(); }
  SUBCASE("gpipe") { every_way<ctpipe::gpipe(2, 4), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): interleaved matches sequential training bitwise") {
  SUBCASE("p=2 v=2") { every_way<ctpipe::interleaved(2, 4, 2), mlp, walk>(); }
  SUBCASE("p=2 v=2, groups of 4 (two FIFOs cross)") { every_way<ctpipe::interleaved(2, 8, 2, 4)>(); }
  SUBCASE("p=4 v=2") { every_way<ctpipe::interleaved(4, 8, 2), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): split backward matches sequential training bitwise") {
  SUBCASE("zb_h1 p=2") { every_way<ctpipe::zb_h1(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_h2 p=2") { every_way<ctpipe::zb_h2(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_v p=2") { every_way<ctpipe::zb_v(2, 4), split_mlp, walk>(); }
  SUBCASE("zb_v p=4") { every_way<ctpipe::zb_v(4, 8), split_mlp, walk>(); }
  SUBCASE("interleaved_zero_bubble p=2") { every_way<ctpipe::interleaved_zero_bubble(2, 4, 2), split_mlp, walk>(); }
  SUBCASE("dualpipe_v p=2") { every_way<ctpipe::dualpipe_v(2, 4), split_mlp>(); }
  SUBCASE("dualpipe_v p=4") { every_way<ctpipe::dualpipe_v(4, 8), split_mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): D = 2 replicas x P = 2 ranks: bitwise the replicas' sums") {
  SUBCASE("1F1B") { every_way<ctpipe::one_f_one_b(2, 4)>(2); }
  SUBCASE("interleaved") { every_way<ctpipe::interleaved(2, 4, 2), mlp, walk>(2); }
  SUBCASE("zb_v") { every_way<ctpipe::zb_v(2, 4), split_mlp, walk>(2); }
  SUBCASE("1F1B, a model with a layer without parameters") {
    every_way<ctpipe::one_f_one_b(2, 4), test::device::relu_mlp, walk>(2);
  }
}
TEST_CASE("nccl executor (simulated): D = 4 replicas x P = 1 rank") {
  every_way<ctpipe::one_f_one_b(1, 2), mlp, walk>(4);
}
