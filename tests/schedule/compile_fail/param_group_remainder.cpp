// build error: ctpipe::interleaved: microbatches mod group must be 0 or at least ranks, or the schedule deadlocks
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 10, 2)>();
