// build error: ctpipe executor: tables with split backward ops \(I/W\) are not supported by this executor yet
// build error: executor_requirements<ctpipe::detail::executor_kind::cuda
// The CUDA executor does not run I and W yet (the host executor does): a zero-bubble table is refused.
#include "../cuda/sim_mlp.hpp"
using net = test::device::mlp;
constexpr auto table = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
static_assert(exec::ranks == 2);
