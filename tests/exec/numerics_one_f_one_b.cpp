// one_f_one_b at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run.
#include "support/numerics.hpp"

CTPIPE_NUMERICS_TESTS(one_f_one_b)

// A model with a layer without parameters (test::relu_mlp): nothing to stash, sum or update for it.
TEST_CASE("host executor: one_f_one_b p=2 trains a model with a layer without parameters, bitwise") {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
  constexpr auto stages = ctpipe::partition<test::relu_mlp, 2>();
  test::train_against_sequential<table, stages, ctpipe::dispatch::unrolled, test::relu_mlp>();
}
