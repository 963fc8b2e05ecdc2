// The near-empty layer of the executor benchmarks: forward and backward add one to a counter,
// kept alive with benchmark::DoNotOptimize; the loss copies its input.
#pragma once
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

#include <array>
#include <cstdint>

namespace bench {

struct tick {
  using input_type = std::array<std::uint64_t, 1>;
  using output_type = std::array<std::uint64_t, 1>;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const {
    y[0] = x[0] + 1;
    benchmark::DoNotOptimize(y);
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    dx[0] = dy[0] + 1;
    benchmark::DoNotOptimize(dx);
  }
};

struct count_loss {
  using target_type = int;
  double operator()(const tick::output_type& y, int, tick::output_type& dy) const {
    dy[0] = y[0];
    return 0.0;
  }
};

/// Reports `tasks` (per iteration) and ns_per_task; with `handoffs`, ns_per_handoff too.
inline void per_task_counters(benchmark::State& state, double tasks, double handoffs = 0.0) {
  const auto per = benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert;
  state.counters["tasks"] = tasks;
  state.counters["ns_per_task"] = benchmark::Counter(tasks, per);
  if (handoffs > 0.0) state.counters["ns_per_handoff"] = benchmark::Counter(handoffs, per);
}

using one_layer = ctpipe::model<tick>;
using two_layers = ctpipe::model<tick, tick>;

}  // namespace bench
