// build error: ctpipe executor: a bidirectional table \(dualpipe\) runs models that are chains so far
// build output under: 16384 bytes
// DualPipe runs on the host executor, over a chain: a graph model's mirrored stages are not run yet.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 32>;
constexpr auto stages = ctpipe::partition<net, 2>();
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4), ctpipe::model_crossings<net, stages>()>();
using exec = ctpipe::host_executor<table, net, stages, loss>;
static_assert(exec::ranks == 2);
