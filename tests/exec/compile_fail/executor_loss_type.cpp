// build error: ctpipe executor: Loss must have a target_type and double operator\(\)\(const output_type& y, const target_type& t, output_type& dy\) \(a const ctpipe::context& may come first\)
// build output under: 18432 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;  // 4 classes, but the model gives 5
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
