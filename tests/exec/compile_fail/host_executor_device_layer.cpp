// build error: ctpipe executor: every layer must be a host layer
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 2)>();
using exec = ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), test::loss>;
static_assert(exec::ranks == 2);
