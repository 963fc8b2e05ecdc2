// Instructions per task of the host executor, counted by callgrind (repeatable on a noisy machine,
// unlike wall time). Usage: instructions TABLE STEPS, TABLE 0/1 = GPipe p=1 with m = 64 / 512 (near-
// empty tasks), 2/3 = naive p=2 with m = 16 / 128. bench/instructions.sh runs it and does the sums.
#include <benchmark/benchmark.h>  // DoNotOptimize
#include <ctpipe/ctpipe.hpp>
#include <array>
#include <cstdlib>
#include <vector>
struct tick { using input_type = std::array<unsigned long,1>; using output_type = input_type; static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y[0] = x[0] + 1; benchmark::DoNotOptimize(y); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const { dx[0] = dy[0] + 1; benchmark::DoNotOptimize(dx);} };
struct count_loss { using target_type = int; double operator()(const tick::output_type& y, int, tick::output_type& dy) const { dy[0] = y[0]; return 0.0; } };
using M = ctpipe::model<tick>;
using M2 = ctpipe::model<tick, tick>;
template <auto T, class Mo> void run(int steps) {
  Mo model; count_loss loss; constexpr int m = T.params.microbatches;
  std::vector<tick::input_type> in(m); std::vector<int> tg(m);
  ctpipe::host_executor<T, Mo, ctpipe::partition<Mo, T.stages()>(), count_loss> e(model, loss);
  for (int i = 0; i < steps; ++i) benchmark::DoNotOptimize(e.step(in, tg).data());
}
constexpr auto a = ctpipe::make_table<ctpipe::gpipe(1, 64)>();
constexpr auto b = ctpipe::make_table<ctpipe::gpipe(1, 512)>();
constexpr auto c = ctpipe::make_table<ctpipe::naive(2, 16)>();
constexpr auto d = ctpipe::make_table<ctpipe::naive(2, 128)>();
int main(int argc, char** argv) {
  int which = std::atoi(argv[1]), steps = std::atoi(argv[2]);
  if (which == 0) run<a, M>(steps); else if (which == 1) run<b, M>(steps); else if (which == 2) run<c, M2>(steps); else run<d, M2>(steps);
}
