// The NCCL executor's simulated sweep (numerics.cpp says how it runs), continued: DualPipe, each
// stage's two copies summed by the pair of processes that run them, and D = 2 replicas.
#include "support/nccl_numerics.hpp"

using test::nccl::every_way;
using split_mlp = test::device::split_token_block_mlp;
using mlp = test::device::token_block_mlp;
// Most tables walk (the task code is the same either way; unrolling costs compile time): DualPipe
// p = 2 and 1F1B at D = 2 unroll.
constexpr auto walk = ctpipe::dispatch::table_walk;

TEST_CASE("nccl executor (simulated): dualpipe matches the two halves' sequential training bitwise") {
  // Each process runs a stage of each pipeline; a stage's two copies are summed by the pair of
  // processes that run them (an all-reduce of two), and then, with replicas, across the replicas.
  SUBCASE("p=2") { every_way<ctpipe::dualpipe(2, 4), test::device::split_stateful_mlp>(); }
  SUBCASE("p=4") { every_way<ctpipe::dualpipe(4, 8), test::device::split_stateful_mlp, walk>(); }
  SUBCASE("D=2 x p=2, microbatches of mixed lengths") {
    every_way<ctpipe::dualpipe(2, 4), test::device::token_mlp, walk>(2);
  }
}
TEST_CASE("nccl executor (simulated): D = 2 replicas x P = 2 ranks: bitwise the replicas' sums") {
  SUBCASE("1F1B") { every_way<ctpipe::one_f_one_b(2, 4)>(2); }
  SUBCASE("interleaved") { every_way<ctpipe::interleaved(2, 4, 2), mlp, walk>(2); }
  SUBCASE("zb_v") { every_way<ctpipe::zb_v(2, 4), split_mlp, walk>(2); }
  SUBCASE("1F1B, a model with a layer without parameters") {
    every_way<ctpipe::one_f_one_b(2, 4), test::device::relu_mlp, walk>(2);
  }
}
