// build error: ctpipe::interleaved: chunks must be at least 1
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 8, 0)>();
