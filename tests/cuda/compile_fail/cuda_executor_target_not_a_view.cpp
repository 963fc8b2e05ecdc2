// build error: ctpipe executor: input_type and target_type must be trivially copyable views of device memory
// build error: executor_requirements<ctpipe::cuda::detail::executor_tag
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <vector>

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
// A device loss whose targets are a host container, not a view of device memory.
struct host_targets_loss {
  using target_type = std::vector<int>;
  using logits = test::device::sim_loss::logits;
  void operator()(const ctpipe::cuda::context&, const logits&, const target_type&, logits&, double*) const {}
};
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), host_targets_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
