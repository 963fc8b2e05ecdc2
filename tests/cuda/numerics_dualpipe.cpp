// The simulated CUDA executor against the reference of two pipelines, on DualPipe: each rank runs
// a stage of each pipeline (the second's layers in a mirror model), each pipeline takes half of the
// microbatches, and each stage's two copies' gradients are summed once both have run their last
// backward; bitwise equal to each half summed in order, then the two halves added
// (test::reference_step). tests/cuda/split.cpp runs p = 2 on two devices under the sanitizers too.
#include "support/sim_numerics.hpp"

constexpr auto walk = ctpipe::dispatch::table_walk;

TEST_CASE("cuda executor (simulated): dualpipe p=2 matches the two halves' sequential training bitwise") {
  test::device::every_placement<ctpipe::dualpipe(2, 4), test::device::split_stateful_mlp>();
}
TEST_CASE("cuda executor (simulated): dualpipe p=4 matches the two halves' sequential training bitwise") {
  test::device::every_placement<ctpipe::dualpipe(4, 8), test::device::split_stateful_mlp, walk>();
}
TEST_CASE("cuda executor (simulated): dualpipe p=2 over microbatches of mixed lengths, bitwise") {
  test::device::every_placement<ctpipe::dualpipe(2, 4), test::device::token_mlp, walk>();
}
