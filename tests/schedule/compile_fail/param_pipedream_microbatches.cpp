// build error: ctpipe::pipedream: microbatches \(per step\) must be at least ranks - 1
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::pipedream_2bw(4, 2)>();
