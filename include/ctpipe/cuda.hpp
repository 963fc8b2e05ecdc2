// The CUDA executor: link ctpipe::cuda (CMake) and include this header, from a .cu file compiled by
// nvcc (-std=c++20) or from a .cpp file compiled by g++ or clang.
//
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
//   constexpr auto stages = ctpipe::partition<net, 4>();
//   ctpipe::cuda::executor<table, net, stages, loss> exec(model, loss);  // 4 ranks, 4 streams, device 0
//   auto losses = exec.step(inputs, targets, ctpipe::cuda::launch::graph);
#pragma once

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/cuda/runtime.hpp>
#include <ctpipe/cuda/tensor.hpp>

namespace ctpipe::cuda {

/// The CUDA executor on the CUDA runtime. Placement: a device number (every rank on it, a stream
/// each) or a placement<ranks>.
template <auto Table, model_type Model, auto Stages, class Loss, auto Placement = 0,
          dispatch Dispatch = dispatch::automatic>
using executor = basic_executor<Table, Model, Stages, Loss, Placement, Dispatch, runtime>;

}  // namespace ctpipe::cuda
