// build error: ctpipe::check: an op must come after the ops of its own rank that it depends on
// build error: ctpipe::make_execution_plan: the table does not verify
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <algorithm>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>>;
// A compute table whose rank 0 runs B0 before F0: the plan lowers it, verifies it, and refuses it.
constexpr auto bad = [] {
  auto t = ctpipe::make_compute_table<ctpipe::gpipe(2, 2)>();
  std::swap(t.programs[0][0], t.programs[0][2]);
  return t;
}();
using loss = ctpipe::layers::softmax_cross_entropy<2, 5>;
using exec = ctpipe::host_executor<bad, net, ctpipe::partition<net, 2>(), loss>;
constexpr int r = exec::ranks;
