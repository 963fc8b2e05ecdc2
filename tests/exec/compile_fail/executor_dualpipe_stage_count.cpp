// build error: ctpipe executor: the stage plan must have as many stages as the table's pipeline
// build output under: 16384 bytes
// DualPipe's p stages: a stage plan of 2p stages (one per table stage) is refused, naming the rule.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using d = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<d, d, d, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 8>;
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 4>(), loss>;
static_assert(exec::ranks == 2);
