// build error: ctpipe executor: the stage plan must have as many stages as the table \(ranks x chunks\)
// build error: executor_requirements<ctpipe::detail::executor_kind::host
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 5>, dense<2, 5, 2>>;
constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, 4, 2)>();  // 4 stages
using loss = ctpipe::layers::softmax_cross_entropy<2, 2>;
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
