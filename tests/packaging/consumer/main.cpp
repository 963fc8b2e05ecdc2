#include <ctpipe/ctpipe.hpp>

constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
static_assert(ctpipe::check<table>());
static_assert(ctpipe::analyse(table, ctpipe::cost_model{1.0, 2.0}).makespan == 33.0);

int main() { return ctpipe::verify(ctpipe::generate(ctpipe::gpipe(2, 4))).ok() ? 0 : 1; }
