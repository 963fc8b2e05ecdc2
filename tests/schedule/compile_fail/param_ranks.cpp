// build error: ctpipe::one_f_one_b: ranks must be at least 1
// build error: one_f_one_b_schedule::parameter_error<.*ranks_at_least_one, 0>
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::one_f_one_b(0, 8)>();
