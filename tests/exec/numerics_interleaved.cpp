// interleaved at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run.
#include "numerics.hpp"

namespace {
template <int P>
void check_ranks() {
  constexpr auto table = ctpipe::make_table<ctpipe::interleaved(P, test::microbatches, 2)>();
  constexpr auto stages = ctpipe::partition<test::mlp, 2 * P>();
  test::train_against_sequential<table, stages>();
}
}  // namespace

TEST_CASE("host executor: interleaved p=1 matches sequential training bitwise") { check_ranks<1>(); }
TEST_CASE("host executor: interleaved p=2 matches sequential training bitwise") { check_ranks<2>(); }
TEST_CASE("host executor: interleaved p=3 matches sequential training bitwise") { check_ranks<3>(); }
TEST_CASE("host executor: interleaved p=4 matches sequential training bitwise") { check_ranks<4>(); }
