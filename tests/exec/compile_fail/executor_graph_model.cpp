// build error: ctpipe executor: the model is not a chain \(a node reads other than the previous layer's whole output: a skip connection or several sources\); the executors run chains so far, ctpipe::sequential_step runs any model
// build output under: 16384 bytes
// A residual model on the host executor.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 32>;
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss>;
static_assert(exec::ranks == 2);
