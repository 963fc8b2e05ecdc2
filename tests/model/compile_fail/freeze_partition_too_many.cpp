// build error: ctpipe::freeze_partition: frozen must be at least 0 and leave at least one active layer per stage
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using l = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<l, l, l, l>;
constexpr auto stages = ctpipe::freeze_partition<net, 2>(3);
