// build error: ctpipe executor: every layer must be a device layer
// build output under: 12288 bytes
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/layers/dense.hpp>
#include "../../support/stream_sim.hpp"
using net = ctpipe::model<ctpipe::layers::dense<2, 3, 4>, ctpipe::layers::dense<2, 4, 5>>;
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec =
    ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), ctpipe::layers::softmax_cross_entropy<2, 5>,
                                 0, ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
