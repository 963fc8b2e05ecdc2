// build error: ctpipe::check: an op whose input is on another rank must be preceded by its receive
// build error: ctpipe executor: the table does not verify
// build error: executor_requirements<ctpipe::cuda::detail::executor_tag
// The CUDA executor checks a table's own sends and receives through the core, as the host executor does.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <algorithm>

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
// Rank 1's first op (RECV_F) dropped: F runs on a value it never received.
constexpr auto bad = [] {
  auto t = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();
  std::rotate(t.programs[1].begin(), t.programs[1].begin() + 1, t.programs[1].begin() + t.length[1]);
  --t.length[1];
  return t;
}();
using exec = ctpipe::cuda::basic_executor<bad, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
