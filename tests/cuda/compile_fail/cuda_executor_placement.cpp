// build error: ctpipe::cuda::executor: Placement must be a device number or a ctpipe::cuda::placement<ranks> with one device per rank of the table
// build output under: 12288 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec =
    ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss,
                                 ctpipe::cuda::device_per_rank<3>(), ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
