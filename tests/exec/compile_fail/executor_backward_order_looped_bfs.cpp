// build error: ctpipe executor: every stage must run its backward ops in microbatch order
// Looped BFS runs a stage's backwards in decreasing microbatch order (as PyTorch does): its weight
// gradients would sum in another order than sequential training's, so the executors refuse it.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
constexpr auto table = ctpipe::make_table<ctpipe::looped_bfs(1, 2, 2)>();
using loss = ctpipe::layers::softmax_cross_entropy<2, 5>;
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
