// build error: ctpipe::interleaved: group must be at least ranks
// build error: invalid_parameter<.*interleaved.*group_at_least_ranks.*3>
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 8, 2, 3)>();
