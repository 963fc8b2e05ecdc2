// The compile-time budget: interleaved p=16, m=64, v=2 generated, verified and analysed in
// constant evaluation under the default limits of g++ 12 and clang 14.
#include <ctpipe/ctpipe.hpp>

constexpr auto table = ctpipe::make_table<ctpipe::interleaved(16, 64, 2)>();
static_assert(ctpipe::check<table>());
constexpr auto figures = ctpipe::analyse(table, ctpipe::cost_model{.forward = 0.5, .backward = 1.0});
// m(F+B) + (p-1)(F+B)/v with F+B = 3 per stage.
static_assert(figures.makespan == 64 * 3.0 + 15 * 3.0 / 2);
static_assert(figures.peak_live[0] == 2 * 15 + 16 + 1);
