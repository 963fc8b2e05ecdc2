// build error: ctpipe executor: a model that is not a chain cannot freeze a prefix of layers \(freeze_partition\) yet
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 32>;
constexpr auto stages = ctpipe::freeze_partition<net, 2>(1);
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2), ctpipe::model_crossings<net, stages>()>();
using exec = ctpipe::host_executor<table, net, stages, loss>;
static_assert(exec::ranks == 2);
