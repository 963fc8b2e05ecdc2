// build error: ctpipe executor: a model whose layers share parameters \(ctpipe::shared_with\) cannot freeze a prefix of layers \(freeze_partition\) yet
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using d = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<d, d, d, ctpipe::shared_with<1, d>>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 8>;
constexpr auto stages = ctpipe::freeze_partition<net, 2>(1);
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec = ctpipe::host_executor<table, net, stages, loss>;
static_assert(exec::ranks == 2);
