// The MPI executor (bench/README.md, "MPI executor"), run as two processes:
//
//   mpirun --bind-to none -np 2 build/bench/bench/bench_mpi   (bench/run_all.sh runs it so)
//
//  - hand-off: naive model parallelism over 2 ranks with layers that touch nothing (idle: the
//    hand-off alone) or copy their input (copy), so that a step is 2m hand-offs one after another
//    (activation forwards, gradient backwards) and nothing else but the step's end; against the
//    floor, a bare MPI ping-pong of the same message size (MPI_Send / MPI_Recv), at 64 B, 4 KiB,
//    64 KiB, 1 MiB and 16 MiB. All report ns per hand-off (one message from one process to the
//    other).
//  - step: one step of an 8-layer MLP under 1F1B on 2 ranks, on the MPI executor (2 processes)
//    and on the host executor (2 threads of process 0, while process 1 sleeps); recorded on every
//    process (record_steps); and of a model with 1 MiB activations (four copying layers) alike.
//  - skip: a residual that skips two stages, sent directly against carried through the stages
//    between (bench/skip_models.hpp), on the MPI executor: ms a step and bytes a step.
// Every benchmark runs a fixed number of iterations, the same on both processes (each iteration is
// collective); process 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>

#include "mpi_bench.hpp"
#include "skip_models.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

int process = 0;

void per_handoff(benchmark::State& state, double handoffs_per_iteration) {
  state.counters["handoff"] = benchmark::Counter(static_cast<double>(state.iterations()) * handoffs_per_iteration,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// ---- hand-off ------------------------------------------------------------------------------------
// Copy: y = x and dx = dy; else (idle) they touch nothing, so that the hand-off is all there is.
template <std::size_t Bytes, bool Copy>
struct handoff_layer {
  using input_type = std::array<float, Bytes / sizeof(float)>;
  using output_type = input_type;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const {
    if constexpr (Copy) y = x;
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    if constexpr (Copy) dx = dy;
  }
};
template <class T, bool Copy>
struct handoff_loss {
  using target_type = int;
  double operator()(const T& y, const int&, T& dy) const {
    if constexpr (Copy) dy = y;
    return 0.0;
  }
};

// 64 microbatches a step, 8 from 1 MiB up (the inputs and the naive schedule's stash hold them all).
template <std::size_t Bytes>
constexpr int handoff_microbatches = Bytes < (std::size_t{1} << 20) ? 64 : 8;

template <std::size_t Bytes>
void BM_pingpong(benchmark::State& state) {
  std::vector<std::byte> buffer(Bytes);
  const int peer = 1 - process;
  for (auto _ : state) {
    if (process == 0) {
      MPI_Send(buffer.data(), static_cast<int>(Bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), static_cast<int>(Bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer.data(), static_cast<int>(Bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), static_cast<int>(Bytes), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
    }
  }
  per_handoff(state, 2.0);
}

template <std::size_t Bytes, bool Copy>
void BM_executor_handoff(benchmark::State& state) {
  using layer = handoff_layer<Bytes, Copy>;
  using net = ctpipe::model<layer, layer>;
  using loss = handoff_loss<typename layer::output_type, Copy>;
  constexpr int m = handoff_microbatches<Bytes>;
  constexpr auto table = ctpipe::make_table<ctpipe::naive(2, m)>();
  net model;
  loss l;
  ctpipe::mpi::executor<table, net, ctpipe::partition<net, 2>(), loss> exec(model, l);
  const std::vector<typename net::input_type> inputs(m);
  const std::vector<int> targets(m);
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(inputs, targets).data());
  per_handoff(state, 2.0 * m);
}
template <std::size_t Bytes>
void BM_idle_handoff(benchmark::State& state) {
  BM_executor_handoff<Bytes, false>(state);
}
template <std::size_t Bytes>
void BM_copy_handoff(benchmark::State& state) {
  BM_executor_handoff<Bytes, true>(state);
}

// Hand-offs per size: about 20,000 up to 4 KiB, fewer above (each a fixed count, the same on both
// processes).
#define CTPIPE_HANDOFF_SIZE(bytes, pingpongs)                                                            \
  BENCHMARK(BM_pingpong<bytes>)->Iterations(pingpongs)->UseRealTime();                                   \
  BENCHMARK(BM_idle_handoff<bytes>)->Iterations(pingpongs / handoff_microbatches<bytes>)->UseRealTime(); \
  BENCHMARK(BM_copy_handoff<bytes>)->Iterations(pingpongs / handoff_microbatches<bytes>)->UseRealTime()
CTPIPE_HANDOFF_SIZE(64, 20000);
CTPIPE_HANDOFF_SIZE(4096, 20000);
CTPIPE_HANDOFF_SIZE(65536, 5000);
CTPIPE_HANDOFF_SIZE(1048576, 800);
CTPIPE_HANDOFF_SIZE(16777216, 80);
#undef CTPIPE_HANDOFF_SIZE

// ---- step ----------------------------------------------------------------------------------------
using ctpipe::layers::dense;
constexpr std::size_t batch = 16, width = 128;
using hidden = dense<batch, width, width>;
using mlp = ctpipe::model<hidden, hidden, hidden, hidden, hidden, hidden, hidden,
                          dense<batch, width, 8, ctpipe::layers::activation::none>>;
using mlp_loss = ctpipe::layers::softmax_cross_entropy<batch, 8>;
constexpr int step_microbatches = 16;
constexpr auto step_table = ctpipe::make_table<ctpipe::one_f_one_b(2, step_microbatches)>();
constexpr auto step_stages = ctpipe::partition<mlp, 2>();

mlp make_mlp() {
  mlp m;
  unsigned seed = 1;
  ctpipe::for_each_layer(m, [&](auto& l) { l.init(seed++); });
  return m;
}

// One step of Table (M microbatches) on the MPI executor (2 processes; Recorded: every step
// recorded), and on the host executor (2 threads of process 0, while process 1 idles).
template <class Net, class Loss, auto Table, auto Stages, bool Recorded = false>
void step_mpi(benchmark::State& state, Net model) {
  Loss l;
  ctpipe::mpi::executor<Table, Net, Stages, Loss> exec(model, l);
  if constexpr (Recorded) exec.record_steps(true);
  const std::vector<typename Net::input_type> inputs(static_cast<std::size_t>(Table.microbatches()));
  const std::vector<typename Loss::target_type> targets(inputs.size());
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(inputs, targets).data());
}
template <class Net, class Loss, auto Table, auto Stages>
void step_host(benchmark::State& state, Net model) {
  Loss l;
  const std::vector<typename Net::input_type> inputs(static_cast<std::size_t>(Table.microbatches()));
  const std::vector<typename Loss::target_type> targets(inputs.size());
  if (process == 0) {
    ctpipe::host_executor<Table, Net, Stages, Loss> exec(model, l);
    for (auto _ : state) benchmark::DoNotOptimize(exec.step(inputs, targets).data());
  } else {
    for (auto _ : state) {
    }
  }
  bench::idle_barrier();
}

void BM_step_mpi(benchmark::State& state) { step_mpi<mlp, mlp_loss, step_table, step_stages>(state, make_mlp()); }
// With every step recorded (record_steps: the clock around each task, the clocks' alignment as the
// step starts, the gather to process 0 as it ends).
void BM_step_mpi_recorded(benchmark::State& state) {
  step_mpi<mlp, mlp_loss, step_table, step_stages, true>(state, make_mlp());
}
void BM_step_host(benchmark::State& state) { step_host<mlp, mlp_loss, step_table, step_stages>(state, make_mlp()); }
BENCHMARK(BM_step_host)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_step_mpi)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_step_host)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond)->Name("BM_step_host/again");
BENCHMARK(BM_step_mpi)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond)->Name("BM_step_mpi/again");
BENCHMARK(BM_step_mpi_recorded)->Iterations(100)->UseRealTime()->Unit(benchmark::kMillisecond);

// A model with 1 MiB activations: four layers that copy their input (memory-bound work, 1 MiB a
// layer each way), 1F1B on 2 ranks, 8 microbatches.
using mib_layer = handoff_layer<std::size_t{1} << 20, true>;
using mib_net = ctpipe::model<mib_layer, mib_layer, mib_layer, mib_layer>;
using mib_loss = handoff_loss<mib_layer::output_type, true>;
constexpr auto mib_table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
constexpr auto mib_stages = ctpipe::partition<mib_net, 2>();
void BM_step_1mib_mpi(benchmark::State& state) { step_mpi<mib_net, mib_loss, mib_table, mib_stages>(state, {}); }
void BM_step_1mib_host(benchmark::State& state) { step_host<mib_net, mib_loss, mib_table, mib_stages>(state, {}); }
BENCHMARK(BM_step_1mib_host)->Iterations(50)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_step_1mib_mpi)->Iterations(50)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_step_1mib_host)
    ->Iterations(50)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Name("BM_step_1mib_host/again");
BENCHMARK(BM_step_1mib_mpi)
    ->Iterations(50)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Name("BM_step_1mib_mpi/again");

// ---- skip ----------------------------------------------------------------------------------------
// A step of way Direct on the MPI executor (2 processes).
template <class M, bool Direct>
void BM_skip(benchmark::State& state) {
  using exec = ctpipe::mpi::executor<M::template table_of<Direct>, typename M::template net_of<Direct>,
                                     M::template stages_of<Direct>, typename M::loss>;
  M::template time_steps<Direct, exec>(state);
}
using skip_small = skip_bench::models<16>;   // 16 KB a tensor
using skip_large = skip_bench::models<256>;  // 256 KB a tensor
// (Relayed first in each group: the report gives direct's figures as ratios to it.)
BENCHMARK(BM_skip<skip_small, false>)->Name("skip/mpi_16KB/relayed")->Iterations(300)->UseRealTime();
BENCHMARK(BM_skip<skip_small, true>)->Name("skip/mpi_16KB/direct")->Iterations(300)->UseRealTime();
BENCHMARK(BM_skip<skip_large, false>)->Name("skip/mpi_256KB/relayed")->Iterations(30)->UseRealTime();
BENCHMARK(BM_skip<skip_large, true>)->Name("skip/mpi_256KB/direct")->Iterations(30)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  const bench::two_processes mpi(argc, argv);
  process = mpi.process;
  if (!mpi.ok("bench_mpi")) return 2;
  benchmark::Initialize(&argc, argv);
  if (process == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    bench::silent quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return 0;
}
