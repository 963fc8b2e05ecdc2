// build error: ctpipe executor: the table is forward only \(schedule_info::forward_only\): an executor trains with a training table
// build error: executor_requirements<ctpipe::detail::host_executor_tag
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
// A forward-only table where a training table belongs: evaluate() derives it from the training table.
constexpr auto train = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
constexpr auto forward = ctpipe::make_forward_table<train>();
using loss = ctpipe::layers::softmax_cross_entropy<2, 5>;
using exec = ctpipe::host_executor<forward, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
