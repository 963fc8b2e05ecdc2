// The NCCL executor: link ctpipe::nccl (CMake) and include this header, from a .cu file compiled by
// nvcc (-std=c++20) or from a .cpp file compiled by g++ or clang. ctpipe/nccl/bootstrap.hpp makes
// the job's communicator (over MPI, or through a file).
//
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
//   ctpipe::nccl::executor<table, net, ctpipe::partition<net, 4>(), loss> exec(model, l, job);
//   auto losses = exec.step(inputs, targets, ctpipe::cuda::launch::graph);
#pragma once

#include <ctpipe/cuda.hpp>
#include <ctpipe/nccl/executor.hpp>
#include <ctpipe/nccl/runtime.hpp>

namespace ctpipe::nccl {

/// The NCCL executor on the CUDA runtime and NCCL.
template <auto Table, model_type Model, auto Stages, class Loss, dispatch Dispatch = dispatch::automatic>
using executor = basic_executor<Table, Model, Stages, Loss, cuda::runtime, runtime, Dispatch>;

}  // namespace ctpipe::nccl
