// build error: ctpipe::dualpipe_v: microbatches must be at least 2 \* ranks
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::dualpipe_v(4, 7)>();
