// build error: ctpipe::gpipe: microbatches must be at least 1
// build error: gpipe_schedule::parameter_error<.*microbatches_at_least_one, -3>
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::gpipe(4, -3)>();
