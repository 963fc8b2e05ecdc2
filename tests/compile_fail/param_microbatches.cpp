// build error: ctpipe::gpipe: microbatches must be at least 1
// build error: invalid_parameter<.*gpipe.*microbatches_at_least_one.*-3>
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::gpipe(4, -3)>();
