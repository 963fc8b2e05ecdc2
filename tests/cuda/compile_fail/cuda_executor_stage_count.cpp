// build error: ctpipe executor: the stage plan must have as many stages as the table's pipeline \(ranks x chunks
// build error: executor_requirements<ctpipe::cuda::detail::executor_tag
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, 4, 2)>();  // 4 stages
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
