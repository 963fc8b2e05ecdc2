// build error: ctpipe executor: the model is not a chain
// build output under: 16384 bytes
// The NCCL executor (one process per rank) runs chains so far: a graph model (the block MLP, whose
// residual crosses a stage boundary) is refused with one message naming the executors that run it.
#include "../../support/nccl_sim.hpp"
#include "../../support/sim_mlp.hpp"

#include <ctpipe/nccl/executor.hpp>

using net = test::device::block_mlp;
constexpr auto stages = test::even_stages<net, 2>();
constexpr auto table = test::table_for<ctpipe::one_f_one_b(2, 4), net, stages>();
using exec = ctpipe::nccl::basic_executor<table, net, stages, test::device::sim_loss, sim::backend, sim::nccl::net>;
static_assert(exec::ranks == 2);
