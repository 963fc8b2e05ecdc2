// build error: ctpipe::zb_v: ranks must be at least 1
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::zb_v(0, 4)>();
