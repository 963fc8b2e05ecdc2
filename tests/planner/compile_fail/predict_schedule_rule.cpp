// build error: (plan_failed::microbatches_at_least_two_ranks\(int\)|non-constexpr function 'microbatches_at_least_two_ranks')
// predict() in a constant expression with a schedule that breaks its own rule (DualPipeV, m < 2p).
#include <array>
#include <ctpipe/schedules.hpp>
constexpr std::array<ctpipe::layer_profile, 4> layers{};
constexpr ctpipe::plan_request q{layers, {.devices = 2}, 8};
constexpr auto f = ctpipe::predict(q, {ctpipe::planned_schedule::dualpipe_v, 2, 1, 2, 2, false});
