// The text grid: idle time and every rank.
#include <doctest/doctest.h>

#include "support/test_util.hpp"

TEST_CASE("text grid shows idle time and every rank") {
  const auto grid = ctpipe::timeline_grid(ctpipe::generate(ctpipe::gpipe(2, 2)), ctpipe::cost_model{1, 1});
  CHECK(grid == "r0 | 0F0 0F1 .   .   0B0 0B1\nr1 | .   1F0 1F1 1B0 1B1 .\n");
  const auto g2 = ctpipe::timeline_grid(ctpipe::generate(ctpipe::gpipe(2, 1)), ctpipe::cost_model{1, 2});
  CHECK(g2 == "r0 | 0F0 .   .   .   0B0----\nr1 | .   1F0 1B0---- .   .\n");
}
