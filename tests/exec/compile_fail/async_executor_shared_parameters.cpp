// build error: ctpipe executor: the model's layers share parameters \(ctpipe::shared_with\), which the asynchronous executor does not run
// build output under: 16384 bytes
// The asynchronous executor updates each stage at its own time: a group's gradients never meet.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 4, 4>, dense<2, 4, 4>, ctpipe::shared_with<0, dense<2, 4, 4>>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
using exec = ctpipe::async_executor<ctpipe::pipedream(3, 6), net, ctpipe::partition<net, 3>(), loss, ctpipe::sgd>;
static_assert(exec::ranks == 3);
