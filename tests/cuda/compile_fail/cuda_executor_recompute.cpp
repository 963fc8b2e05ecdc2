// build error: ctpipe executor: Stages: recomputation is not supported by the device executors yet
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>().recompute_all(),
                                          test::device::sim_loss, 0, ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
