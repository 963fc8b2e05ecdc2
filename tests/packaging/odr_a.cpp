// Two translation units include everything and link into one program (no ODR violations).
#include <doctest/doctest.h>
#include <ctpipe/ctpipe.hpp>
int odr_b_makespan();
TEST_CASE("two translation units including everything link") {
  CHECK(ctpipe::analyse(ctpipe::generate(ctpipe::gpipe(2, 2))).makespan == odr_b_makespan());
}
