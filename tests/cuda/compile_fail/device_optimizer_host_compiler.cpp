// build error: ctpipe::cuda::device_optimizer runs the update as CUDA kernels: make it in a file nvcc compiles
// build output under: 6000 bytes
// A backend that cannot launch kernels (ctpipe::cuda::runtime in a file a host compiler compiles:
// its launches_kernels is false there) refuses the device optimizer with one error.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <ctpipe/cuda/optimizer.hpp>

#include "../../support/sim_mlp.hpp"
struct host_only : sim::backend {
  static constexpr bool launches_kernels = false;
};
using net = test::device::mlp;
using exec =
    ctpipe::cuda::basic_executor<ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>(), net, ctpipe::partition<net, 2>(),
                                 test::device::sim_loss, 0, ctpipe::dispatch::automatic, host_only>;
void make(exec& e) { ctpipe::cuda::device_optimizer opt(e, ctpipe::adamw{}); }
