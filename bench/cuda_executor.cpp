// The CUDA executor on a GPU (Google Benchmark; exits 77 without a device):
//  - host time per step, eager issue vs graph replay, 1F1B p=2 of near-empty kernels, 16 to 4,096
//    tasks (counter host_us: the time enqueue() takes on the host; the wall time includes wait());
//  - measured makespan vs the table's simulated makespan, with the costs of F and B measured as
//    one spin kernel each (counter measured_over_simulated); and the step recorded (record_steps):
//    measured against the table replayed with the recorded task times
//    (recorded_measured_over_replayed), an eager step recorded against one not
//    (eager_recorded_over_plain).
#include <benchmark/benchmark.h>

#include <ctpipe/cuda.hpp>

#include "kernels.hpp"

#include <chrono>
#include <cstdio>
#include <vector>

namespace {

long long cycles_forward = 0, cycles_backward = 0;  // 0: near-empty kernels
struct spin_layer {
  using input_type = ctpipe::cuda::tensor<float, 1>;
  using output_type = ctpipe::cuda::tensor<float, 1>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context& c, const input_type&, output_type&) {
    mlp_kernels::spin(cycles_forward, c.stream);
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type&,
                input_type&) {
    mlp_kernels::spin(cycles_backward, c.stream);
  }
};
struct no_loss {
  using target_type = ctpipe::cuda::tensor<int, 1>;
  void operator()(const ctpipe::cuda::context&, const spin_layer::output_type&, const target_type&,
                  spin_layer::output_type&, double*) const {}
};
using net = ctpipe::model<spin_layer, spin_layer>;

struct device_inputs {
  float* buf = nullptr;
  std::vector<spin_layer::input_type> in;
  std::vector<no_loss::target_type> tg;
  explicit device_inputs(int m) {
    cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float));
    in.assign(static_cast<std::size_t>(m), {buf});
    tg.assign(static_cast<std::size_t>(m), {reinterpret_cast<int*>(buf + 32)});
  }
  ~device_inputs() { cudaFree(buf); }
};

// 1F1B p=2 has 8 tasks per microbatch (2 F, 2 B, a send and a receive each way).
template <int M>
void issue(benchmark::State& state, ctpipe::cuda::launch how) {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, M)>();
  using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, 2>(), no_loss>;
  cycles_forward = cycles_backward = 0;
  net m;
  no_loss l;
  executor exec(m, l);
  device_inputs d(M);
  exec.step(d.in, d.tg, how);  // warm-up (and the capture)
  double host = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    exec.enqueue(d.in, d.tg, how);
    host += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    exec.wait();
  }
  state.counters["tasks"] = static_cast<double>(table.size());
  state.counters["host_us"] = host / static_cast<double>(state.iterations());
  state.counters["host_ns_per_task"] =
      1000.0 * host / static_cast<double>(state.iterations()) / static_cast<double>(table.size());
}
template <int M>
void eager(benchmark::State& s) {
  issue<M>(s, ctpipe::cuda::launch::eager);
}
template <int M>
void graph(benchmark::State& s) {
  issue<M>(s, ctpipe::cuda::launch::graph);
}

// Measured vs simulated makespan: F and B as spin kernels of 20 and 40 us (at the clock measured).
template <auto S>
void makespan(benchmark::State& state) {
  constexpr auto table = ctpipe::make_table<S>();
  using executor = ctpipe::cuda::executor<
      table, ctpipe::model<spin_layer, spin_layer, spin_layer, spin_layer>,
      ctpipe::partition<ctpipe::model<spin_layer, spin_layer, spin_layer, spin_layer>, table.stages()>(), no_loss>;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cycles_forward = static_cast<long long>(clock_khz) * 20 / 1000;
  cycles_backward = 2 * cycles_forward;
  ctpipe::model<spin_layer, spin_layer, spin_layer, spin_layer> m;
  no_loss l;
  executor exec(m, l);
  device_inputs d(S.microbatches);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // The cost of one F and one B stage (a stage holds 4 / stages layers), measured alone.
  const auto time_kernel = [&](long long cycles, int count) {
    cudaEventRecord(a, exec.origin_stream());
    for (int i = 0; i < count; ++i) mlp_kernels::spin(cycles, exec.origin_stream());
    cudaEventRecord(b, exec.origin_stream());
    cudaEventSynchronize(b);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    return static_cast<double>(ms);
  };
  const int per_stage = 4 / table.stages();
  ctpipe::stage_costs<table.static_stages> costs{};
  for (std::size_t s = 0; s < table.static_stages; ++s) {
    costs.forward[s] = time_kernel(cycles_forward, per_stage);
    costs.backward[s] = time_kernel(cycles_backward, per_stage);
  }
  const double simulated = ctpipe::analyse(table, costs).makespan;
  // One step, launched `how`, timed on the GPU from its enqueue to its end (ms).
  const auto step_ms = [&](ctpipe::cuda::launch how) {
    cudaEventRecord(a, exec.origin_stream());
    exec.enqueue(d.in, d.tg, how);
    cudaEventRecord(b, exec.origin_stream());
    exec.wait();
    cudaEventSynchronize(b);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    return static_cast<double>(ms);
  };
  exec.step(d.in, d.tg, ctpipe::cuda::launch::graph);
  double measured = 0.0;
  for (auto _ : state) measured += step_ms(ctpipe::cuda::launch::graph);
  measured /= static_cast<double>(state.iterations());
  state.counters["measured_ms"] = measured;
  state.counters["simulated_ms"] = simulated;
  state.counters["measured_over_simulated"] = measured / simulated;
  // What really ran (record_steps): the table replayed with each task's recorded GPU time against
  // the recorded step (the task times as the step ran them, not timed alone), and the eager step
  // with recording on against off, side by side (five each, alternately).
  double eager_off = 0.0, eager_on = 0.0, replay_ratio = 0.0;
  const auto eager_ms = [&](bool on) {
    exec.record_steps(on);
    return step_ms(ctpipe::cuda::launch::eager);
  };
  constexpr int rounds = 5;
  for (int k = 0; k < rounds; ++k) {
    eager_off += eager_ms(false);
    eager_on += eager_ms(true);
    const auto cmp = ctpipe::compare_measured(executor::plan.table, exec.recorded_step());
    replay_ratio += cmp.measured / cmp.replayed;
  }
  exec.record_steps(false);
  state.counters["recorded_measured_over_replayed"] = replay_ratio / rounds;
  state.counters["eager_recorded_over_plain"] = eager_on / eager_off;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

BENCHMARK(eager<2>)->Name("issue/eager/tasks:16");
BENCHMARK(graph<2>)->Name("issue/graph/tasks:16");
BENCHMARK(eager<8>)->Name("issue/eager/tasks:64");
BENCHMARK(graph<8>)->Name("issue/graph/tasks:64");
BENCHMARK(eager<32>)->Name("issue/eager/tasks:256");
BENCHMARK(graph<32>)->Name("issue/graph/tasks:256");
BENCHMARK(eager<128>)->Name("issue/eager/tasks:1024");
BENCHMARK(graph<128>)->Name("issue/graph/tasks:1024");
BENCHMARK(eager<512>)->Name("issue/eager/tasks:4096");
BENCHMARK(graph<512>)->Name("issue/graph/tasks:4096");
BENCHMARK(makespan<ctpipe::gpipe(2, 8)>)->Name("makespan/gpipe/p:2/m:8")->Iterations(20);
BENCHMARK(makespan<ctpipe::one_f_one_b(2, 8)>)->Name("makespan/1f1b/p:2/m:8")->Iterations(20);
BENCHMARK(makespan<ctpipe::one_f_one_b(4, 8)>)->Name("makespan/1f1b/p:4/m:8")->Iterations(20);
BENCHMARK(makespan<ctpipe::interleaved(2, 8, 2)>)->Name("makespan/interleaved/p:2/m:8/v:2")->Iterations(20);

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("bench_cuda_executor: no CUDA device here (exit 77)");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
