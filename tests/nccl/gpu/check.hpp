// The check both GPU programs of the NCCL executor make (nccl_gpu_tests.cpp, under mpirun, and
// nccl_gpu_solo.cpp, one process without MPI): every process trains the MLP of the CUDA example
// through the NCCL executor and, alone, through the CUDA executor with every rank on its own device
// (the same kernels in the same order): the losses of the global batch, and the gradients of the
// process's own layers, must be equal bit for bit, in eager steps and in graph steps (captured
// after the first eager exchange). Then the forward-only pass: evaluate() gives the last step's
// losses again (no update ran, and the model has no dropout) and predict() the CUDA executor's
// outputs, on every process, to the bit.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "layers.hpp"

#include <ctpipe/nccl.hpp>
#include <ctpipe/nccl/bootstrap.hpp>

namespace nccl_gpu {

constexpr std::size_t batch = 8, width = 32, classes = 4, microbatches = 8;
using hidden = mlp_gpu::dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, mlp_gpu::dense<batch, width, classes, false>>;
using loss = mlp_gpu::softmax_cross_entropy<batch, classes>;

struct data {
  float* x = nullptr;
  int* t = nullptr;
  std::vector<net::input_type> inputs;
  std::vector<loss::target_type> targets;
  data() {
    std::vector<float> hx(microbatches * net::input_type::size);
    std::vector<int> ht(microbatches * loss::target_type::size);
    unsigned long long s = 9;
    for (float& v : hx) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
    }
    for (std::size_t i = 0; i < ht.size(); ++i) ht[i] = static_cast<int>(i % classes);
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&x), hx.size() * sizeof(float)), "cudaMalloc");
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&t), ht.size() * sizeof(int)), "cudaMalloc");
    cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(t, ht.data(), ht.size() * sizeof(int), cudaMemcpyHostToDevice);
    for (std::size_t i = 0; i < microbatches; ++i) {
      inputs.push_back({x + i * net::input_type::size});
      targets.push_back({t + i * loss::target_type::size});
    }
  }
  ~data() {
    cudaFree(x);
    cudaFree(t);
  }
};

void init(net& m) {
  unsigned seed = 3;
  ctpipe::for_each_layer(m, [&](auto& l) {
    std::vector<float> p(l.params.size());
    unsigned long long s = seed++;
    for (float& v : p) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5) * 0.3f;
    }
    l.params.upload(p);
  });
}

// The gradients of the layers of pipeline rank `rank`.
template <auto Stages, auto Table>
std::vector<float> rank_gradients(net& m, int rank) {
  std::vector<float> g;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto one = [&](auto& l, int k) {
      if (Table.stage_rank[static_cast<std::size_t>(Stages.stage_of_layer(k))] != rank) return;
      for (float v : l.grads.download()) g.push_back(v);
    };
    (one(m.template layer<K>(), static_cast<int>(K)), ...);
  }
  (std::make_index_sequence<net::size>{});
  return g;
}

// Each microbatch's output by `exec.predict`, into device memory, read back to the host.
template <class Exec>
std::vector<float> predicted(Exec& exec, const data& d) {
  using out = net::output_type;
  float* y = nullptr;
  mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&y), microbatches * out::bytes), "cudaMalloc");
  mlp_gpu::cuda_check(cudaMemset(y, 0xff, microbatches * out::bytes), "cudaMemset");  // (NaNs: each is written)
  std::vector<out> views;
  for (std::size_t i = 0; i < microbatches; ++i) views.push_back({y + i * out::size});
  exec.predict(d.inputs, views);
  std::vector<float> host(microbatches * out::size);
  mlp_gpu::cuda_check(cudaMemcpy(host.data(), y, microbatches * out::bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(y);
  return host;
}

// The reference on this process's device (0 or 1): the CUDA executor, every rank a stream; the
// last step's losses, and its predict() after the steps.
struct expected {
  std::vector<double> losses;
  std::vector<float> outputs;
};
template <auto Table, auto Stages, int Device>
expected reference(const data& d, int steps, net& m) {
  init(m);
  loss l;
  ctpipe::cuda::executor<Table, net, Stages, loss, Device> exec(m, l);
  mlp_gpu::bind_blas(exec);
  expected out;
  for (int i = 0; i < steps; ++i) {
    const auto losses = exec.step(d.inputs, d.targets);
    out.losses.assign(losses.begin(), losses.end());
  }
  out.outputs = predicted(exec, d);
  return out;
}

// `steps` steps through the NCCL executor, launched `how`; 0 when equal to the reference and when
// `also(inputs, targets, want, ref)` (a further executor's check, templated on the table and the
// stages) says so too.
template <auto Schedule, class Also>
int run(const ctpipe::nccl::world& w, ctpipe::cuda::launch how, int steps, Also also) {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr auto stages = ctpipe::partition<net, table.stages()>();
  data d;
  net ref;
  const expected ex =
      w.get().device == 0 ? reference<table, stages, 0>(d, steps, ref) : reference<table, stages, 1>(d, steps, ref);
  const std::vector<double>& want = ex.losses;
  net m;
  init(m);
  loss l;
  ctpipe::nccl::executor<table, net, stages, loss> exec(m, l, w.get());
  mlp_gpu::blas_handles::get().bind(exec.stream(), w.get().device);
  if (exec.second_stream() != exec.stream()) mlp_gpu::blas_handles::get().bind(exec.second_stream(), w.get().device);
  std::vector<double> got;
  for (int i = 0; i < steps; ++i) {
    const auto losses = exec.step(d.inputs, d.targets, how);
    got.assign(losses.begin(), losses.end());
  }
  const bool losses_equal = got == want;
  const bool grads_equal =
      rank_gradients<stages, table>(m, exec.rank()) == rank_gradients<stages, table>(ref, exec.rank());
  std::printf("process %d (rank %d, device %d), %s, %s steps %d: losses %s, gradients %s\n", w.get().process,
              exec.rank(), w.get().device, table.params.name.text,
              how == ctpipe::cuda::launch::graph ? "graph" : "eager", steps, losses_equal ? "equal" : "DIFFER",
              grads_equal ? "equal" : "DIFFER");
  // Forward only (collective: every process), on the trained parameters.
  const auto evaluated = exec.evaluate(d.inputs, d.targets);
  const bool evaluate_equal = std::vector<double>(evaluated.begin(), evaluated.end()) == want;
  const bool predict_equal = predicted(exec, d) == ex.outputs;
  std::printf("process %d (rank %d), %s, after %s steps: evaluate %s, predict %s\n", w.get().process, exec.rank(),
              table.params.name.text, how == ctpipe::cuda::launch::graph ? "graph" : "eager",
              evaluate_equal ? "equal" : "DIFFER", predict_equal ? "equal" : "DIFFER");
  const bool also_equal = also.template operator()<table, stages>(w, d, steps, want, ref);
  return losses_equal && grads_equal && evaluate_equal && predict_equal && also_equal ? 0 : 1;
}

// Every schedule of the check at P processes (1F1B; at P = 2 interleaved and DualPipeV too), eager
// and in graphs.
template <int P, class Also>
int all(const ctpipe::nccl::world& w, Also also) {
  int bad = 0;
  for (auto how : {ctpipe::cuda::launch::eager, ctpipe::cuda::launch::graph}) {
    bad |= run<ctpipe::one_f_one_b(P, microbatches)>(w, how, 3, also);
    if constexpr (P > 1) {  // two boundaries on a rank pair; V placement with I, W and pairs F&B
      bad |= run<ctpipe::interleaved(P, microbatches, 2)>(w, how, 3, also);
      bad |= run<ctpipe::dualpipe_v(P, microbatches)>(w, how, 3, also);
    }
  }
  return bad;
}

}  // namespace nccl_gpu
