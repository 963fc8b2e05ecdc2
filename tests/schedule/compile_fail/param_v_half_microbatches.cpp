// build error: ctpipe::v_half: microbatches must be at least 1
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::v_half(4, 0)>();
