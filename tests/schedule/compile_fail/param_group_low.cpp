// build error: ctpipe::interleaved: group must be at least ranks
// build error: interleaved_schedule::parameter_error<.*group_at_least_ranks, 3>
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 8, 2, 3)>();
