// Instructions per task of the host executor, counted by callgrind (repeatable on a noisy machine,
// unlike wall time). Usage: bench_instructions TABLE STEPS, where TABLE 0 / 1 is GPipe p = 1 with
// m = 64 / 512 (near-empty tasks) and 2 / 3 is naive p = 2 with m = 16 / 128.
// bench/instructions.sh runs it and does the sums.
#include "tick.hpp"

#include <cstdlib>
#include <vector>

namespace {

template <auto Table, class Model>
void run(int steps) {
  Model model;
  bench::count_loss loss;
  constexpr int m = Table.params.microbatches;
  std::vector<bench::tick::input_type> in(m);
  std::vector<int> targets(m);
  ctpipe::host_executor<Table, Model, ctpipe::partition<Model, Table.stages()>(), bench::count_loss> exec(model, loss);
  for (int i = 0; i < steps; ++i) benchmark::DoNotOptimize(exec.step(in, targets).data());
}

constexpr auto gpipe_64 = ctpipe::make_table<ctpipe::gpipe(1, 64)>();
constexpr auto gpipe_512 = ctpipe::make_table<ctpipe::gpipe(1, 512)>();
constexpr auto naive_16 = ctpipe::make_table<ctpipe::naive(2, 16)>();
constexpr auto naive_128 = ctpipe::make_table<ctpipe::naive(2, 128)>();

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int which = std::atoi(argv[1]), steps = std::atoi(argv[2]);
  switch (which) {
    case 0:
      run<gpipe_64, bench::one_layer>(steps);
      break;
    case 1:
      run<gpipe_512, bench::one_layer>(steps);
      break;
    case 2:
      run<naive_16, bench::two_layers>(steps);
      break;
    case 3:
      run<naive_128, bench::two_layers>(steps);
      break;
    default:
      return 2;
  }
}
