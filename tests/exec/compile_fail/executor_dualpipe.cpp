// build error: ctpipe executor: bidirectional tables \(dualpipe, with mirrored stage copies\) are not run by the executors yet
// DualPipe's table verifies and is analysed, but no executor runs two mirrored pipelines yet.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 4>, dense<2, 4, 5>>;
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using loss = ctpipe::layers::softmax_cross_entropy<2, 5>;
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 4>(), loss>;
constexpr int r = exec::ranks;
