// The simulated CUDA executor against the sequential reference: interleaved 1F1B (several stages
// per rank: same-rank slots and rings on one rank pair).
#include "support/sim_numerics.hpp"

TEST_CASE("cuda executor (simulated): interleaved p=2 v=2 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::interleaved(2, 4, 2)>();
}
TEST_CASE("cuda executor (simulated): interleaved p=4 v=2 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::interleaved(4, 8, 2)>();
}
TEST_CASE("cuda executor (simulated): naive p=1 v=4 (every boundary on one rank) matches sequential training bitwise") {
  test::device::every_placement<ctpipe::interleaved(1, 4, 4)>();
}
