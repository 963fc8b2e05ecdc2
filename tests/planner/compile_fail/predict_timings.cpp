// build error: (plan_failed::timings\(\)|non-constexpr function 'timings')
// predict() in a constant expression with a layer whose timings are not in increasing order of size.
#include <array>
#include <ctpipe/schedules.hpp>
constexpr std::array<ctpipe::layer_profile, 2> layers = [] {
  std::array<ctpipe::layer_profile, 2> l{};
  l[1].timings = {{{4, 1, 1, 1}, {2, 1, 1, 1}}};
  l[1].timed = 2;
  return l;
}();
constexpr ctpipe::plan_request q{layers, {.devices = 1}, 4};
constexpr auto f = ctpipe::predict(q, {ctpipe::planned_schedule::one_f_one_b, 1, 1, 2, 1, false});
