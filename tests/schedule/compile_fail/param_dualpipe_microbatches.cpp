// build error: ctpipe::dualpipe: microbatches must be even \(half of them enter at each end\)
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::dualpipe(4, 9)>();
