// build error: ctpipe::cuda::executor: a bidirectional table \(dualpipe\) runs each stage twice, on two ranks: construct the executor with \(model, mirror, loss\)
// build output under: 16384 bytes
// DualPipe in one process: each rank runs one stage of each pipeline, so every stage runs on two
// ranks, and the executor needs a second copy of the layers (device memory it cannot allocate for
// the user's layers). Constructed without one, it says so.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
void construct(net& m, test::device::sim_loss& l) { exec e(m, l); }
