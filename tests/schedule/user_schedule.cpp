// A user's own schedule (tests/support/user_schedule.hpp) is proved, measured, printed and checked for
// its parameters exactly like a built-in one.
#include <doctest/doctest.h>

#include <ctpipe/schedules.hpp>

#include "support/user_schedule.hpp"

namespace {
constexpr auto table = ctpipe::make_table<user::eager_one_f_one_b{4, 8}>();
static_assert(ctpipe::check<table>());
static_assert(table.params.name.view() == "eager_1f1b");
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 1.0, .backward = 2.0});
static_assert(figures.makespan == 33.0);                     // as 1F1B without communication time...
static_assert(figures.peak_live == std::array{7, 5, 3, 1});  // ...holding 2(p-r-1)+1 activations
// ...and with a latency on every message it waits less than 1F1B.
constexpr ctpipe::cost_model slow_links{.forward = 1.0, .backward = 2.0, .comm = 0.5};
static_assert(ctpipe::analyse(table, slow_links).makespan <
              ctpipe::analyse(ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>(), slow_links).makespan);
// Its own parameter rule and the common ones are checked at the entry point.
static_assert(!ctpipe::validate(user::eager_one_f_one_b{65, 8}).ok());
static_assert(ctpipe::validate(user::eager_one_f_one_b{4, 0}).rule == ctpipe::param_rule::microbatches_at_least_one);
}  // namespace

TEST_CASE("a user's schedule: run-time generation, formats and errors as for a built-in one") {
  const auto t = ctpipe::generate(user::eager_one_f_one_b{4, 8});
  CHECK(ctpipe::same_programs(t, table));
  CHECK(ctpipe::to_json(t, ctpipe::analyse(t)).find("\"schedule\": \"eager_1f1b\"") != std::string::npos);
  CHECK_THROWS_WITH_AS((void)ctpipe::generate(user::eager_one_f_one_b{4, 0}),
                       "user::eager_one_f_one_b: microbatches (0) must be at least 1", ctpipe::schedule_error);
}
