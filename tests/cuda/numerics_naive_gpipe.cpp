// The simulated CUDA executor against the sequential reference: naive and GPipe.
#include "support/sim_numerics.hpp"

TEST_CASE("cuda executor (simulated): naive p=2 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::naive(2, 4)>();
}
TEST_CASE("cuda executor (simulated): gpipe p=2 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::gpipe(2, 4)>();
}
TEST_CASE("cuda executor (simulated): gpipe p=4 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::gpipe(4, 8)>();
}
