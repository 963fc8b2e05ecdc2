// Two translation units include everything and link into one program (no ODR violations).
#include <ctpipe/ctpipe.hpp>
#include <doctest/doctest.h>
int odr_b_makespan();
TEST_CASE("two translation units including everything link") {
  CHECK(ctpipe::analyse(ctpipe::generate(ctpipe::gpipe(2, 2))).makespan == odr_b_makespan());
}
