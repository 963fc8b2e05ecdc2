// build error: ctpipe::check: an op whose input is on another rank must be preceded by its receive
// build error: ctpipe executor: the table does not verify
// build error: executor_requirements<ctpipe::detail::host_executor_tag
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <algorithm>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
// Rank 1's first op (RECV_F) dropped: F runs on a value it never received.
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  std::rotate(t.programs[1].begin(), t.programs[1].begin() + 1, t.programs[1].begin() + t.length[1]);
  --t.length[1];
  return t;
}();
using loss = ctpipe::layers::softmax_cross_entropy<2, 5>;
using exec = ctpipe::host_executor<bad, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
