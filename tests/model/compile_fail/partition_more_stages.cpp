// build error: ctpipe::partition: more stages than layers; each stage needs at least one layer
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
constexpr auto p = ctpipe::partition<net, 3>();
