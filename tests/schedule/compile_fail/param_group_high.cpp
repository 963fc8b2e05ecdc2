// build error: ctpipe::interleaved: group must be at most microbatches
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 8, 2, 12)>();
