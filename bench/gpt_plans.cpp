// The planner on the GPT (bench/README.md, "The planner on the GPT"): the model file that
// examples/gpt writes from its own layers measured here (`gpt --write-model FILE`: each layer's F,
// I and W at 1, 2, 4 and 8 sequences a microbatch), read as `ctpipe plan` reads it; each plan below
// predicted from it (ctpipe::predict) and its step measured on the host executor (Google
// Benchmark, real time; the example's GPT: context 64, width 64, 4 heads, 2 blocks; a global batch
// of 16 sequences; OpenBLAS at one thread per rank), and the rank correlation of the two printed.
// The plans vary the microbatch count and size, the schedule, recomputation and the ranks (1 or
// 2, on this machine's 2 cores). The executor's stages are partition<>'s, by the layers' declared
// costs; the table says where they match the planner's, which balances the measured times.
//
// Usage: bench_gpt_plans --model FILE [Google Benchmark's options]
#include "gpt.hpp"  // examples/gpt: the model's shape
#include "model_file.hpp"  // tools/: the planner's model file reader
#include "plan_measure.hpp"

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/gpt.hpp>

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

using ctpipe::planned_schedule;
using gpt_example::shape;

constexpr int global_batch = 16;  // sequences a step

template <std::size_t Sequences>
using sized = ctpipe::layers::gpt<ctpipe::layers::gpt_shape{shape.vocab, shape.tokens, Sequences, shape.width,
                                                            shape.heads, shape.blocks}>;

// One plan: its schedule, sequences a microbatch and recomputation as types.
template <auto Schedule, std::size_t B, bool Recompute>
struct plan_case {
  using g = sized<B>;
  static constexpr auto split = ctpipe::partition<typename g::model, Schedule.stages()>();
  static constexpr auto stages = Recompute ? split.recompute_all() : split;
  static constexpr auto table =
      ctpipe::make_table<Schedule, ctpipe::model_crossings<typename g::model, stages>()>();
  using executor = ctpipe::host_executor<table, typename g::model, stages, typename g::loss>;

  static void run(benchmark::State& state) {
    using set_fn = void (*)(int);  // one OpenBLAS thread per rank
    if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
    constexpr int m = Schedule.info().microbatches;
    auto model = std::make_unique<typename g::model>();
    g::init(*model, 1);
    typename g::loss loss;
    std::vector<typename g::input_type> in(m);
    std::vector<typename g::target_type> targets(m);
    const std::vector<int> extents(m, static_cast<int>(g::rows));
    std::uint64_t s = 11;
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
  }
};

struct entry {
  std::string name;
  ctpipe::plan_choice choice;
  std::vector<int> executor_split;
  void (*run)(benchmark::State&);
};

template <planned_schedule K, auto Schedule, bool Recompute = false>
entry make_entry(const char* name) {
  constexpr int m = Schedule.info().microbatches;
  using c = plan_case<Schedule, static_cast<std::size_t>(global_batch / m), Recompute>;
  const auto& first = c::split.first;
  return {name,
          {K, Schedule.info().ranks, 1, m, Schedule.info().chunks, Recompute},
          std::vector<int>(first.begin(), first.end()),
          &c::run};
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--model") == 0) path = argv[i + 1];
  if (path.empty()) {
    std::fprintf(stderr, "bench_gpt_plans: --model FILE is needed (build/bin/gpt --write-model FILE writes it)\n");
    return 2;
  }
  std::ifstream file(path);
  if (!file) {
    std::fprintf(stderr, "bench_gpt_plans: cannot read '%s'\n", path.c_str());
    return 2;
  }
  const ctpipe::explorer::model_file model = ctpipe::explorer::read_model(file);

  const std::vector<entry> plans{
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 2)>("1 rank m=2 (8 seq)"),
#ifndef CTPIPE_BENCH_BUILD_ONLY  // (bench/CMakeLists.txt: CI compiles one plan)
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(1, 16)>("1 rank m=16 (1 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 2)>("1f1b p=2 m=2 (8 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4)>("1f1b p=2 m=4 (4 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 16)>("1f1b p=2 m=16 (1 seq)"),
      make_entry<planned_schedule::one_f_one_b, ctpipe::one_f_one_b(2, 4), true>("1f1b p=2 m=4 recompute"),
      make_entry<planned_schedule::gpipe, ctpipe::gpipe(2, 8)>("gpipe p=2 m=8 (2 seq)"),
      make_entry<planned_schedule::interleaved, ctpipe::interleaved(2, 8, 2)>("interleaved p=2 m=8 v=2"),
      make_entry<planned_schedule::zb_h1, ctpipe::zb_h1(2, 8)>("zb_h1 p=2 m=8 (2 seq)"),
      make_entry<planned_schedule::zb_v, ctpipe::zb_v(2, 8)>("zb_v p=2 m=8 (2 seq)"),
#endif
  };
  for (const auto& p : plans) benchmark::RegisterBenchmark(p.name.c_str(), p.run)->UseRealTime()->MinTime(0.5);
  bench::collect reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  std::printf("\nmodel file %s: %zu layers\n", path.c_str(), model.layers.size());
  std::printf("| plan | predicted (ms) | measured (ms) | measured / predicted | split as the planner's |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::vector<double> predicted, measured;
  for (const auto& p : plans) {
    ctpipe::plan_request q{model.layers, {.devices = p.choice.ranks}, global_batch, model.input_bytes};
    const auto f = ctpipe::predict(q, p.choice);
    std::vector<int> split(p.executor_split.size());
    ctpipe::stage_split(q, p.choice, split.data());
    const double got = reporter.seconds[p.name];
    predicted.push_back(f.step_time);
    measured.push_back(got);
    std::printf("| %s | %.2f | %.2f | %.2f | %s |\n", p.name.c_str(), f.step_time * 1e3, got * 1e3, got / f.step_time,
                split == p.executor_split ? "yes" : "no");
  }
  double lo = measured.empty() ? 0 : measured[0], hi = lo;
  for (double x : measured) lo = std::min(lo, x), hi = std::max(hi, x);
  std::printf("\n%zu plans; measured spread (slowest / fastest) %.2fx; Spearman rank correlation %.3f\n", plans.size(),
              hi / lo, plans.size() > 1 ? bench::spearman(predicted, measured) : 0.0);
  return 0;
}
