// The MPI executor's device path on the CUDA runtime: link ctpipe::mpi and ctpipe::cuda (CMake).
// One process and one GPU per rank, device layers, tensors staged through pinned host memory
// (ctpipe/mpi/device_executor.hpp); for users without NCCL (ctpipe/nccl.hpp is faster).
//
//   ctpipe::mpi::device_executor<table, net, stages, loss> exec(model, l, device);
//   auto losses = exec.step(inputs, targets);
#pragma once

#include <ctpipe/cuda.hpp>
#include <ctpipe/mpi.hpp>
#include <ctpipe/mpi/device_executor.hpp>

namespace ctpipe::mpi {

/// The MPI executor's device path on the CUDA runtime.
template <auto Table, model_type Model, auto Stages, class Loss, dispatch Dispatch = dispatch::automatic>
using device_executor = basic_device_executor<Table, Model, Stages, Loss, cuda::runtime, Dispatch>;

}  // namespace ctpipe::mpi
