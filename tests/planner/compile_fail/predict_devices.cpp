// build error: (plan_failed::devices\(\)|non-constexpr function 'devices')
// predict() in a constant expression with ranks x replicas that is not the device count.
#include <array>
#include <ctpipe/schedules.hpp>
constexpr std::array<ctpipe::layer_profile, 4> layers{};
constexpr ctpipe::plan_request q{layers, {.devices = 4}, 8};
constexpr auto f = ctpipe::predict(q, {ctpipe::planned_schedule::gpipe, 2, 1, 2, 1, false});
