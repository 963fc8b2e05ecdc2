// Runs what tests/nvcc/executors.cu (compiled by nvcc) built.
#include <doctest/doctest.h>

bool nvcc_host_step_matches_sequential();

TEST_CASE("nvcc: a host executor compiled by nvcc trains like the sequential reference, bit for bit") {
  CHECK(nvcc_host_step_matches_sequential());
}
