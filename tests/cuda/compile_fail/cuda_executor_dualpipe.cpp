// build error: ctpipe executor: bidirectional tables \(dualpipe\) run on ctpipe::host_executor and ctpipe::mpi::executor so far
// build output under: 16384 bytes
#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
