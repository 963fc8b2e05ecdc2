// build error: ctpipe executor: the model's layers share parameters \(ctpipe::shared_with\); this executor does not run shared parameters yet
// build output under: 16384 bytes
// The MPI executor's device path does not sum shared groups yet (the CUDA and NCCL executors do).
#include <ctpipe/mpi/device_executor.hpp>

#include "../../support/sim_mlp.hpp"
using square = test::device::sim_dense<4, 8, 8>;
using net = ctpipe::model<square, square, ctpipe::shared_with<0, square>>;
using loss = test::device::sim_loss_of<ctpipe::layers::softmax_cross_entropy<4, 8>>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using exec = ctpipe::mpi::basic_device_executor<table, net, ctpipe::partition<net, 2>(), loss, sim::backend>;
static_assert(exec::ranks == 2);
