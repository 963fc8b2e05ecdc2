// The planner on the GPT (bench/README.md, "The planner on the GPT"), run as two processes:
//
//   mpirun -np 2 build/bench/bench/bench_gpt_plans --model FILE   (bench/gpt_plans.sh runs it so)
//
// FILE is the model file examples/gpt writes from its own layers measured here (`gpt
// --write-model FILE`: each layer's F, I and W at 1, 2, 4 and 8 sequences a microbatch), read as
// `ctpipe plan` reads it. Each plan below is predicted from it (ctpipe::predict) and its step
// measured (Google Benchmark, real time, the median of 3 repetitions of 100 steps; the example's GPT: context 64,
// width 64, 4 heads, 2 blocks; a global batch of 16 sequences; OpenBLAS at one thread per rank),
// and the rank correlation of the two printed. The plans vary the microbatch count and size, the
// schedule, recomputation, and P x D on this machine's 2 cores: one pipeline of 1 or 2 ranks on
// the host executor (threads of process 0, while process 1 sleeps), or 2 replicas of one rank on
// the MPI executor (one process each). The all-reduce's figure comes from a bare MPI_Allreduce of
// the model's gradients as the executor sums them (a layer at a time), measured first. The executors' stages are
// partition<>'s (by the layers' declared costs); the table says where they match the planner's, which balances measured
// times.
#include "gpt.hpp"         // examples/gpt: the model's shape
#include "model_file.hpp"  // tools/: the planner's model file reader
#include "mpi_bench.hpp"
#include "plan_measure.hpp"

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>
#include <ctpipe/mpi.hpp>

#include <mpi.h>

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

int process = 0;
constexpr int steps = 100;      // per plan and repetition, on both processes (each MPI step is collective)
constexpr int repetitions = 3;  // the median's

using ctpipe::planned_schedule;
using gpt_example::shape;

constexpr int global_batch = 16;  // sequences a step

template <std::size_t Sequences>
using sized = ctpipe::layers::gpt<ctpipe::layers::gpt_shape{shape.vocab, shape.tokens, Sequences, shape.width,
                                                            shape.heads, shape.blocks}>;

// One plan: its schedule, sequences a microbatch, recomputation and executor as types. Replicas:
// one pipeline on the host executor (process 0; process 1 waits), or one replica a process.
template <auto Schedule, std::size_t B, bool Recompute, bool Replicas>
struct plan_case {
  using g = sized<B>;
  static constexpr auto split = ctpipe::partition<typename g::model, Schedule.stages()>();
  static constexpr auto stages = Recompute ? split.recompute_all() : split;
  static constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<typename g::model, stages>()>();
  using executor =
      std::conditional_t<Replicas, ctpipe::mpi::executor<table, typename g::model, stages, typename g::loss>,
                         ctpipe::host_executor<table, typename g::model, stages, typename g::loss>>;

  static void run(benchmark::State& state) {
    using set_fn = void (*)(int);  // one OpenBLAS thread per rank
    if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
    if (!Replicas && process != 0) {
      for (auto _ : state) {
      }
      bench::idle_barrier();
      return;
    }
    constexpr int m = Schedule.info().microbatches;
    auto model = std::make_unique<typename g::model>();
    g::init(*model, 1);
    typename g::loss loss;
    std::vector<typename g::input_type> in(m);
    std::vector<typename g::target_type> targets(m);
    const std::vector<int> extents(m, static_cast<int>(g::rows));
    std::uint64_t s = 11 + static_cast<std::uint64_t>(process);
    for (int i = 0; i < m; ++i)
      for (std::size_t r = 0; r < g::rows; ++r) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        in[i].v[r] = static_cast<std::int32_t>((s >> 33) % shape.vocab);
        targets[i][r] = static_cast<int>((s >> 17) % shape.vocab);
      }
    executor exec(*model, loss);
    for (auto _ : state) {
      auto losses = exec.step(in, targets, extents);
      benchmark::DoNotOptimize(losses);
      ctpipe::zero_gradients(*model);
    }
    if (!Replicas) bench::idle_barrier();
  }
};

struct entry {
  std::string name;
  ctpipe::plan_choice choice;
  std::vector<int> executor_split;
  void (*run)(benchmark::State&);
};

template <planned_schedule K, auto Schedule, bool Recompute = false, int Replicas = 1>
entry make_entry(const char* name) {
  constexpr int m = Schedule.info().microbatches;
  using c = plan_case<Schedule, static_cast<std::size_t>(global_batch / (Replicas * m)), Recompute, (Replicas > 1)>;
  const auto& first = c::split.first;
  return {name,
          {K, Schedule.info().ranks, Replicas, m, Schedule.info().chunks, Recompute},
          std::vector<int>(first.begin(), first.end()),
          &c::run};
}

// Seconds of the replicas' gradient sums as the MPI executor makes them: one MPI_Iallreduce of
// floats per layer with parameters (`floats`: each one's count), then a wait for all; the best of 5
// rounds of 20.
double allreduce_seconds(const std::vector<std::size_t>& floats) {
  std::vector<std::vector<float>> g;
  for (std::size_t n : floats) g.emplace_back(n, 1.0f);
  std::vector<MPI_Request> r(g.size());
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < 20; ++i) {
      for (std::size_t k = 0; k < g.size(); ++k)
        MPI_Iallreduce(MPI_IN_PLACE, g[k].data(), static_cast<int>(g[k].size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       &r[k]);
      MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE);
    }
    best = std::min(best, (MPI_Wtime() - t0) / 20);
  }
  MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::two_processes mpi(argc, argv);
  process = mpi.process;
  if (!mpi.ok("bench_gpt_plans")) return 2;
  const auto refuse = [&](const std::string& why) {
    if (process == 0) std::fprintf(stderr, "bench_gpt_plans: %s\n", why.c_str());
    return 2;
  };
  benchmark::Initialize(&argc, argv);
  std::string path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--model") == 0) path = argv[i + 1];
  if (path.empty()) return refuse("--model FILE is needed (build/bin/gpt --write-model FILE writes it)");
  std::ifstream file(path);
  if (!file) return refuse("cannot read '" + path + "'");
  const ctpipe::explorer::model_file model = ctpipe::explorer::read_model(file);

  const std::vector<entry> plans{
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 2)>("1 rank m=2 (8 seq)"),
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt: CI compiles two plans)
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 16)>("1 rank m=16 (1 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 2)>("1f1b p=2 m=2 (8 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4)>("1f1b p=2 m=4 (4 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 16)>("1f1b p=2 m=16 (1 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4), true>("1f1b p=2 m=4 recompute"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(2, 8)>("gpipe p=2 m=8 (2 seq)"),
      make_entry<planned_schedule::interleaved, ctpipe::interleaved(2, 8, 2)>("interleaved p=2 m=8 v=2"),
      make_entry<planned_schedule::zb_h1, ctpipe::zb_h1(2, 8)>("zb_h1 p=2 m=8 (2 seq)"),
      make_entry<planned_schedule::zb_v, ctpipe::zb_v(2, 8)>("zb_v p=2 m=8 (2 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 1), false, 2>("2 replicas m=1 (8 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 4), false, 2>("2 replicas m=4 (2 seq)"),
#endif
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 8), false, 2>("2 replicas m=8 (1 seq)"),
  };
  // The all-reduce: the model's gradients (the planner's figure: the distinct parameters' bytes),
  // summed a layer at a time as the MPI executor sums them (the tied head's copy too).
  double parameter_bytes = 0.0;
  std::vector<std::size_t> floats;
  for (const auto& l : model.layers) {
    parameter_bytes += l.shares_with >= 0 ? 0.0 : l.parameter_bytes;
    if (l.parameter_bytes > 0) floats.push_back(static_cast<std::size_t>(l.parameter_bytes / sizeof(float)));
  }
  const double allreduce = allreduce_seconds(floats);

  for (const auto& p : plans)
    benchmark::RegisterBenchmark(p.name.c_str(), p.run)->Iterations(steps)->Repetitions(repetitions)->UseRealTime();
  bench::collect reporter;
  bench::silent quiet;
  if (process == 0)
    benchmark::RunSpecifiedBenchmarks(&reporter);
  else
    benchmark::RunSpecifiedBenchmarks(&quiet);
  benchmark::Shutdown();
  if (process != 0) return 0;

  std::printf("\nmodel file %s: %zu layers; the gradients' all-reduce (%.0f bytes, %zu layers): %.3f ms\n",
              path.c_str(), model.layers.size(), parameter_bytes, floats.size(), allreduce * 1e3);
  std::printf("| plan | predicted (ms) | measured (ms) | measured / predicted | split as the planner's |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::vector<double> predicted, measured;
  for (const auto& p : plans) {
    const ctpipe::plan_request q{
        model.layers,
        {.devices = p.choice.ranks * p.choice.replicas, .allreduce_bandwidth = parameter_bytes / allreduce},
        global_batch,
        model.input_bytes};
    bench::plan_row(p.name, q, p.choice, p.executor_split, reporter.seconds[p.name], 1e3, 2, predicted, measured);
  }
  double lo = measured[0], hi = lo;
  for (double x : measured) lo = std::min(lo, x), hi = std::max(hi, x);
  std::printf("\n%zu plans; measured spread (slowest / fastest) %.2fx; Spearman rank correlation %.3f\n", plans.size(),
              hi / lo, bench::spearman(predicted, measured));
  return 0;
}
