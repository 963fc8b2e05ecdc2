// Compile-time tests: the figures table of docs/schedules.md, proved by static_assert.
#include <doctest/doctest.h>

#include <ctpipe/ctpipe.hpp>

namespace {
constexpr ctpipe::cost_model unit{.forward = 1.0, .backward = 2.0};

constexpr auto naive = ctpipe::make_table<ctpipe::naive(4, 8)>();
constexpr auto gpipe = ctpipe::make_table<ctpipe::gpipe(4, 8)>();
constexpr auto f1b1 = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
constexpr auto inter2 = ctpipe::make_table<ctpipe::interleaved(4, 8, 2)>();
constexpr auto inter4 = ctpipe::make_table<ctpipe::interleaved(4, 8, 4)>();

static_assert(ctpipe::check<naive>() && ctpipe::check<gpipe>() && ctpipe::check<f1b1>());
static_assert(ctpipe::check<inter2>() && ctpipe::check<inter4>());
static_assert(ctpipe::check(f1b1));  // the function form

constexpr auto r_naive = ctpipe::analyse(naive, unit);
constexpr auto r_gpipe = ctpipe::analyse(gpipe, unit);
constexpr auto r_1f1b = ctpipe::analyse(f1b1, unit);
constexpr auto r_i2 = ctpipe::analyse(inter2, ctpipe::cost_model{.forward = 0.5, .backward = 1.0});
constexpr auto r_i4 = ctpipe::analyse(inter4, ctpipe::cost_model{.forward = 0.25, .backward = 0.5});

static_assert(r_naive.makespan == 96.0);
static_assert(r_naive.peak_live == std::array{1, 1, 1, 1});
static_assert(r_naive.bubble_fraction == 0.75);  // (p-1)/p
static_assert(r_gpipe.makespan == 33.0);
static_assert(r_gpipe.peak_live == std::array{8, 8, 8, 8});
static_assert(r_1f1b.makespan == 33.0);
static_assert(r_1f1b.peak_live == std::array{4, 3, 2, 1});
static_assert(r_1f1b.bubble_fraction == 1.0 - 96.0 / 132.0);  // (p-1)/(m+p-1) = 3/11
static_assert(r_1f1b.busy == std::array{24.0, 24.0, 24.0, 24.0});
static_assert(r_1f1b.idle == std::array{9.0, 9.0, 9.0, 9.0});
static_assert(r_i2.makespan == 28.5);
static_assert(r_i2.peak_live == std::array{11, 9, 7, 5});
static_assert(r_i4.makespan == 26.25);
static_assert(r_i4.peak_live == std::array{19, 17, 15, 13});

// Slots by liveness: as many activation slots as live activations at the peak.
static_assert(r_1f1b.activation_slots == r_1f1b.peak_live);
// Channels: the forward channel from rank r to r+1 holds at most its warm-up depth.
static_assert(r_1f1b.capacity(0, 1) == 4 && r_1f1b.capacity(2, 3) == 2 && r_1f1b.capacity(3, 0) == 0);

// Tables are structural: usable as template arguments.
template <auto Table>
struct program_length {
  static constexpr int value = Table.length[0];
};
static_assert(program_length<f1b1>::value == 16 + 8 + 8);  // 16 compute ops, 8 sends, 8 receives
}  // namespace

TEST_CASE("compile-time figures (the static_asserts above) also hold at run time") {
  const auto r = ctpipe::analyse(ctpipe::generate(ctpipe::interleaved(4, 8, 4)), ctpipe::cost_model{0.25, 0.5});
  CHECK(r.makespan == 26.25);
  CHECK(r.peak_live == std::vector{19, 17, 15, 13});
}
