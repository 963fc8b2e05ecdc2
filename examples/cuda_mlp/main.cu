// The quickstart's MLP trained on a GPU: device layers (cuBLAS GEMMs, small kernels), four ranks
// on one device, each a stream of its own, through every schedule; each step captured once into a
// CUDA graph and replayed. Checked against the host: the same model, trained sequentially on the
// CPU from the same start, must reach the same losses (within float rounding: cuBLAS sums in
// another order than the host's loops). Exits 77 where there is no GPU.
// Ordinary CUDA code: nvcc compiles this file (schedules, executor, layers) and kernels.cu alike.
#include "layers.hpp"

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t batch = 8, width = 32, classes = 4, microbatches = 8;
constexpr int steps = 30;
constexpr float rate = 0.01f;

// The host model, as in the quickstart: it gives the start and the reference.
using host_hidden = ctpipe::layers::dense<batch, width, width>;
using host_net =
    ctpipe::model<host_hidden, host_hidden, host_hidden, host_hidden, host_hidden, host_hidden, host_hidden,
                  host_hidden, ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>>;
using host_loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;

using hidden = mlp_gpu::dense<batch, width, width>;
using net = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          mlp_gpu::dense<batch, width, classes, false>>;
using loss = mlp_gpu::softmax_cross_entropy<batch, classes>;
static_assert(net::costs == host_net::costs, "the same declared costs, so the same stages");

struct data_set {
  std::vector<host_net::input_type> inputs{microbatches};
  std::vector<host_loss::target_type> targets{microbatches};
};
data_set make_data() {  // the quickstart's four Gaussian blobs
  data_set d;
  unsigned long long s = 42;
  for (std::size_t i = 0; i < microbatches; ++i)
    for (std::size_t b = 0; b < batch; ++b) {
      const int c = static_cast<int>((i + b) % classes);
      d.targets[i][b] = c;
      for (std::size_t f = 0; f < width; ++f) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float noise = static_cast<float>(static_cast<double>(s >> 40) / static_cast<double>(1ull << 24) - 0.5);
        d.inputs[i](b, f) = (f % classes == static_cast<std::size_t>(c) ? 1.0f : 0.0f) + 0.5f * noise;
      }
    }
  return d;
}

// The data on the device: views for the executor.
struct device_data {
  int* targets_memory = nullptr;
  float* inputs_memory = nullptr;
  std::vector<net::input_type> inputs;
  std::vector<loss::target_type> targets;
  explicit device_data(const data_set& d) {
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&inputs_memory), microbatches * net::input_type::bytes),
                        "cudaMalloc");
    mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&targets_memory), microbatches * loss::target_type::bytes),
                        "cudaMalloc");
    for (std::size_t i = 0; i < microbatches; ++i) {
      float* x = inputs_memory + i * net::input_type::size;
      int* t = targets_memory + i * loss::target_type::size;
      mlp_gpu::cuda_check(cudaMemcpy(x, d.inputs[i].v.data(), net::input_type::bytes, cudaMemcpyHostToDevice),
                          "cudaMemcpy");
      mlp_gpu::cuda_check(cudaMemcpy(t, d.targets[i].data(), loss::target_type::bytes, cudaMemcpyHostToDevice),
                          "cudaMemcpy");
      inputs.push_back({x});
      targets.push_back({t});
    }
  }
  ~device_data() {
    cudaFree(inputs_memory);
    cudaFree(targets_memory);
  }
};

void upload(net& gpu, host_net& host) {
  [&]<std::size_t... K>(std::index_sequence<K...>) { (gpu.layer<K>().params.upload(host.layer<K>().params), ...); }
  (std::make_index_sequence<net::size>{});
}

// What one schedule's training gives: the mean loss of every step, and whether a step replayed from
// the graph equals the eager step from the same parameters, bit for bit.
struct run_result {
  std::vector<double> means;
  bool graph_equals_eager = false;
};

// Trains from the host model's start through `Schedule`.
template <auto Schedule>
run_result train(host_net& start, const device_data& dd) {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr auto stages = ctpipe::partition<net, table.stages()>();
  using executor = ctpipe::cuda::executor<table, net, stages, loss>;  // every rank on device 0
  net model;
  upload(model, start);
  loss l;
  executor exec(model, l);
  mlp_gpu::bind_blas(exec);
  // One eager step and one replayed step from the same parameters must agree to the bit.
  const auto first = exec.step(dd.inputs, dd.targets);
  const std::vector<double> eager(first.begin(), first.end());
  const auto eager_grads = mlp_gpu::gradients(model);
  const auto replay = exec.step(dd.inputs, dd.targets, ctpipe::cuda::launch::graph);
  run_result r;
  r.graph_equals_eager =
      std::equal(eager.begin(), eager.end(), replay.begin(), replay.end()) && mlp_gpu::gradients(model) == eager_grads;
  for (int step = 0; step < steps; ++step) {
    const auto losses = exec.step(dd.inputs, dd.targets, ctpipe::cuda::launch::graph);
    double mean = 0.0;
    for (double x : losses) mean += x / static_cast<double>(losses.size());
    r.means.push_back(mean);
    mlp_gpu::sgd_step(model, rate, exec.origin_stream());
  }
  mlp_gpu::cuda_check(cudaStreamSynchronize(exec.origin_stream()), "cudaStreamSynchronize");
  return r;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("cuda_mlp: no CUDA device here; nothing to run (exit 77: skipped)");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf(
      "cuda_mlp: the quickstart's 9-layer MLP on %s, 4 ranks (4 streams), 8 microbatches, %d steps per schedule\n",
      prop.name, steps);

  host_net start;
  int seed = 1;
  ctpipe::for_each_layer(start, [&](auto& layer) { layer.init(static_cast<unsigned>(seed++)); });
  const data_set d = make_data();
  const device_data dd(d);

  // The reference: the same start trained sequentially on the host.
  host_net reference = start;
  host_loss hl;
  std::vector<double> ref_means, ref_losses(microbatches);
  for (int step = 0; step < steps; ++step) {
    ctpipe::sequential_step(reference, hl, std::span<const host_net::input_type>(d.inputs),
                            std::span<const host_loss::target_type>(d.targets), std::span<double>(ref_losses));
    double mean = 0.0;
    for (double x : ref_losses) mean += x / static_cast<double>(microbatches);
    ref_means.push_back(mean);
    ctpipe::sgd_step(reference, rate);
  }

  bool ok = true;
  const auto report = [&](const char* name, const run_result& r) {
    const std::vector<double>& means = r.means;
    const bool graph_ok = r.graph_equals_eager;
    double worst = 0.0;
    for (int i = 0; i < steps; ++i)
      worst = std::max(worst, std::abs(means[static_cast<std::size_t>(i)] - ref_means[static_cast<std::size_t>(i)]) /
                                  ref_means[static_cast<std::size_t>(i)]);
    const bool close = worst < 1e-4;
    ok = ok && close && graph_ok;
    std::printf("%-12s loss %.6f -> %.6f  (host %.6f -> %.6f, worst relative difference %.1e)  graph replay %s eager\n",
                name, means.front(), means.back(), ref_means.front(), ref_means.back(), worst, graph_ok ? "==" : "!=");
  };
  report("naive", train<ctpipe::naive(4, microbatches)>(start, dd));
  report("gpipe", train<ctpipe::gpipe(4, microbatches)>(start, dd));
  report("1f1b", train<ctpipe::one_f_one_b(4, microbatches)>(start, dd));
  report("interleaved", train<ctpipe::interleaved(4, microbatches, 2)>(start, dd));
  std::puts(ok ? "every schedule trains as the host does" : "MISMATCH");
  return ok ? 0 : 1;
}
