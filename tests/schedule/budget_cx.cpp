// The compile-time budget: interleaved p=16, m=64, v=2, ZB-V p=16, m=64 and V-Half p=8, m=32 generated, verified and
// analysed in constant evaluation under the default limits of g++ 12 and clang 14.
#include <ctpipe/ctpipe.hpp>

constexpr auto table = ctpipe::make_table<ctpipe::interleaved(16, 64, 2)>();
static_assert(ctpipe::check<table>());
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 0.5, .backward = 1.0});
// m(F+B) + (p-1)(F+B)/v with F+B = 3 per stage.
static_assert(figures.makespan == 64 * 3.0 + 15 * 3.0 / 2);
static_assert(figures.peak_live[0] == 2 * 15 + 16 + 1);

// ZB-V p=16, m=64 (two stages a rank on V placement, split backward: 10,240 tasks).
constexpr auto zb_v_table = ctpipe::make_table<ctpipe::zb_v(16, 64)>();
static_assert(ctpipe::check<zb_v_table>());
constexpr auto zb_v_figures = ctpipe::analyse(
    zb_v_table, ctpipe::cost_model{.forward = 0.5, .backward = 1.0, .backward_input = 0.5, .backward_weight = 0.5});
static_assert(zb_v_figures.max_span() == 64 * 3.0);  // zero bubble at F = I = W: every span is m(F+I+W)
static_assert(zb_v_figures.max_bubble() == 0.0);

// V-Half p=8, m=32 (its construction squeezes and fills a block: about 1M of clang 14's steps, the
// largest V-Min/V-Half that fits both compilers' defaults; p=16, m=64 needs CTPIPE_LARGE_CONSTEXPR).
constexpr auto v_half_table = ctpipe::make_table<ctpipe::v_half(8, 32)>();
static_assert(ctpipe::check<v_half_table>());
static_assert(ctpipe::plan_memory(v_half_table).peak_live[0] == 2 * ((8 + 2) / 2));
