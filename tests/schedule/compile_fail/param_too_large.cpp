// build error: ctpipe::gpipe: ranks, microbatches and ranks \* chunks must each stay below 2\^20
// build error: gpipe_schedule::parameter_error<.*stages_fit_in_int, 1048576>
#include <ctpipe/schedules.hpp>
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(1 << 20, 1)>();
