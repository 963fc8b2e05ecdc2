// build error: ctpipe::interleaved_zero_bubble: microbatches must be a multiple of the rounds
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved_zero_bubble(4, 9, 2)>();
