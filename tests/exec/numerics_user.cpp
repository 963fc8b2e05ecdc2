// A schedule written outside the library (tests/support/user_schedule.hpp) trains the MLP through the host
// executor like a built-in one, with gradients equal to the bit to the sequential run.
#include "support/numerics.hpp"
#include "support/user_schedule.hpp"

namespace {
template <int P>
void check_user() {
  constexpr auto table = ctpipe::make_table<user::eager_one_f_one_b{P, test::microbatches}>();
  constexpr auto stages = ctpipe::partition<test::stateful_mlp, table.stages()>();
  SUBCASE("unrolled") { test::train_against_sequential<table, stages, ctpipe::dispatch::unrolled>(); }
  SUBCASE("table walk") { test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk>(); }
}
}  // namespace

TEST_CASE("host executor: a user's schedule p=2 matches sequential training bitwise") { check_user<2>(); }
TEST_CASE("host executor: a user's schedule p=4 matches sequential training bitwise") { check_user<4>(); }
