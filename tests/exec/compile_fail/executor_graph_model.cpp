// build error: ctpipe executor: the model is not a chain \(a node reads other than the previous layer's whole output: a skip connection or several sources\); this executor runs chains so far: ctpipe::host_executor and ctpipe::sequential_step run any model
// build output under: 16384 bytes
// A residual model on the asynchronous executor (the host executor runs it).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 32>;
using exec = ctpipe::async_executor<ctpipe::pipedream(2, 4), net, ctpipe::partition<net, 2>(), loss, ctpipe::sgd>;
constexpr int r = exec::ranks;
