// build error: ctpipe::interleaved: group must equal microbatches when there are fewer microbatches than ranks
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::interleaved(4, 3, 2, 4)>();
