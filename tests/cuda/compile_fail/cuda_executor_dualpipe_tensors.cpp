// build error: ctpipe executor: a bidirectional table \(dualpipe\) runs on the device executors models whose layers each take and give one tensor so far
// build output under: 16384 bytes
// DualPipe on the device executors: a chain whose layers pass two tensors (ctpipe::tensors) takes
// the engine's graph path, which does not run a stage's mirrored copies yet.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "two_tensor_layers.hpp"
using net = ctpipe::model<fork2, join2, fork2, join2>;
static_assert(net::is_chain);
constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
