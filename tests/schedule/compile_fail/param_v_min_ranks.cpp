// build error: ctpipe::v_min: ranks must be at least 1
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::v_min(0, 4)>();
