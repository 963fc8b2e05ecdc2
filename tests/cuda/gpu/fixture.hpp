// The GPU tests' model and data: the example's MLP of device layers (examples/cuda_mlp/layers.hpp)
// and its host twin, eight microbatches in device memory, and one step of a schedule through the
// CUDA executor (tests/cuda/gpu: gpu_tests.cpp, device_optimizer.cu).
#pragma once

#include <doctest/doctest.h>

#include "layers.hpp"

#include <ctpipe/layers/dense.hpp>

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

namespace gpu_test {

constexpr std::size_t batch = 8, width = 32, classes = 4, microbatches = 8;
using host_hidden = ctpipe::layers::dense<batch, width, width>;
using host_net = ctpipe::model<host_hidden, host_hidden, host_hidden, host_hidden,
                               ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>>;
using host_loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;
using hidden = mlp_gpu::dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, mlp_gpu::dense<batch, width, classes, false>>;
using loss = mlp_gpu::softmax_cross_entropy<batch, classes>;

struct fixture {
  host_net start;
  std::vector<host_net::input_type> inputs{microbatches};
  std::vector<host_loss::target_type> targets{microbatches};
  float* x = nullptr;
  int* t = nullptr;
  std::vector<net::input_type> dx;
  std::vector<loss::target_type> dt;
  fixture() {
    int seed = 3;
    ctpipe::for_each_layer(start, [&](auto& l) { l.init(static_cast<unsigned>(seed++)); });
    unsigned long long s = 9;
    for (std::size_t i = 0; i < microbatches; ++i)
      for (std::size_t b = 0; b < batch; ++b) {
        targets[i][b] = static_cast<int>((i + b) % classes);
        for (std::size_t f = 0; f < width; ++f) {
          s = s * 6364136223846793005ull + 1442695040888963407ull;
          inputs[i](b, f) = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
        }
      }
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&x), microbatches * net::input_type::bytes), "cudaMalloc");
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&t), microbatches * loss::target_type::bytes),
                        "cudaMalloc");
    for (std::size_t i = 0; i < microbatches; ++i) {
      cudaMemcpy(x + i * net::input_type::size, inputs[i].v.data(), net::input_type::bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(t + i * loss::target_type::size, targets[i].data(), loss::target_type::bytes, cudaMemcpyHostToDevice);
      dx.push_back({x + i * net::input_type::size});
      dt.push_back({t + i * loss::target_type::size});
    }
  }
  ~fixture() {
    cudaFree(x);
    cudaFree(t);
  }
  void upload(net& m) {
    [&]<std::size_t... K>(std::index_sequence<K...>) { (m.layer<K>().params.upload(start.layer<K>().params), ...); }
    (std::make_index_sequence<net::size>{});
  }
  // One step through Schedule on Placement; returns losses and gradients.
  template <auto Schedule, auto Placement = 0>
  std::pair<std::vector<double>, std::vector<float>> run(ctpipe::cuda::launch how) {
    constexpr auto table = ctpipe::make_table<Schedule>();
    using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, table.stages()>(), loss, Placement>;
    net m;
    upload(m);
    loss l;
    executor exec(m, l);
    mlp_gpu::bind_blas(exec);
    auto losses = exec.step(dx, dt, how);
    std::vector<double> lv(losses.begin(), losses.end());
    if (how == ctpipe::cuda::launch::graph) {  // a replay, not only the capture
      losses = exec.step(dx, dt, how);
      CHECK(std::equal(lv.begin(), lv.end(), losses.begin(), losses.end()));
    }
    return {lv, mlp_gpu::gradients(m)};
  }
  // One step of DualPipe (Schedule: dualpipe(p, microbatches)) on one device, the second pipeline's
  // layers in a mirror model; returns losses and the model's gradients (the two copies' sum).
  template <auto Schedule>
  std::pair<std::vector<double>, std::vector<float>> run_mirrored(ctpipe::cuda::launch how) {
    constexpr auto table = ctpipe::make_table<Schedule>();
    using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, table.stages() / 2>(), loss>;
    net m, mirror;
    upload(m);
    upload(mirror);
    loss l;
    executor exec(m, mirror, l);
    mlp_gpu::bind_blas(exec);
    auto losses = exec.step(dx, dt, how);
    std::vector<double> lv(losses.begin(), losses.end());
    if (how == ctpipe::cuda::launch::graph) {
      losses = exec.step(dx, dt, how);
      CHECK(std::equal(lv.begin(), lv.end(), losses.begin(), losses.end()));
    }
    CHECK(mlp_gpu::gradients(mirror) == mlp_gpu::gradients(m));  // both copies hold the sum
    return {lv, mlp_gpu::gradients(m)};
  }
  // DualPipe's reference: each half of the microbatches through one rank, then the first half's
  // gradients plus the second's (one float addition each, as the executor's axpy).
  std::pair<std::vector<double>, std::vector<float>> halves() {
    constexpr std::size_t half = microbatches / 2;
    constexpr auto table = ctpipe::make_table<ctpipe::naive(1, half)>();
    using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, 1>(), loss>;
    std::vector<double> lv;
    std::vector<float> sum;
    for (std::size_t c = 0; c < 2; ++c) {
      net m;
      upload(m);
      loss l;
      executor exec(m, l);
      mlp_gpu::bind_blas(exec);
      const auto losses = exec.step(std::span<const net::input_type>(dx).subspan(c * half, half),
                                    std::span<const loss::target_type>(dt).subspan(c * half, half));
      lv.insert(lv.end(), losses.begin(), losses.end());
      const std::vector<float> g = mlp_gpu::gradients(m);
      if (c == 0)
        sum = g;
      else
        for (std::size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
    return {lv, sum};
  }
};

}  // namespace gpu_test
