// Hand-off latency between two ranks on two threads (bench/README.md, "Hand-off"): the time from
// the end of a task on one rank to the start of the task that consumes its output on the other.
//  - executor: naive model parallelism over 2 ranks, near-empty layers that take a timestamp as
//    they start and as they end; per microbatch the activation crosses forwards and the gradient
//    backwards, and nothing else runs, so every gap is one hand-off.
//  - floor: two bare threads passing a timestamp back and forth through one atomic word, with the
//    same clock: what the machine's core-to-core path costs without any executor.
// Reports the median, 90th and 99th percentiles and the maximum of all hand-offs of the run.
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Times of every forward and backward call of a layer, in call order (= microbatch order here).
struct call_log {
  std::vector<std::int64_t> forward_begin, forward_end, backward_begin, backward_end;
  std::size_t forwards = 0, backwards = 0;
  explicit call_log(std::size_t n) : forward_begin(n), forward_end(n), backward_begin(n), backward_end(n) {}
  void rewind() { forwards = backwards = 0; }
};

struct stamp {
  using input_type = std::array<std::uint64_t, 1>;
  using output_type = std::array<std::uint64_t, 1>;
  static constexpr double cost = 1.0;
  call_log* log = nullptr;
  void forward(const input_type& x, output_type& y) const {
    log->forward_begin[log->forwards] = now_ns();
    y[0] = x[0] + 1;
    log->forward_end[log->forwards++] = now_ns();
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    log->backward_begin[log->backwards] = now_ns();
    dx[0] = dy[0] + 1;
    log->backward_end[log->backwards++] = now_ns();
  }
};
struct copy_loss {
  using target_type = int;
  double operator()(const stamp::output_type& y, int, stamp::output_type& dy) const {
    dy[0] = y[0];
    return 0.0;
  }
};

void report(benchmark::State& state, std::vector<std::int64_t>& samples) {
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  const auto at = [&](double q) {
    return static_cast<double>(samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))]);
  };
  state.counters["handoffs"] = static_cast<double>(samples.size());
  state.counters["median_ns"] = at(0.5);
  state.counters["p90_ns"] = at(0.9);
  state.counters["p99_ns"] = at(0.99);
  state.counters["max_ns"] = static_cast<double>(samples.back());
}

constexpr int microbatches = 64;
constexpr auto naive_2 = ctpipe::make_table<ctpipe::naive(2, microbatches)>();
using net = ctpipe::model<stamp, stamp>;

template <ctpipe::dispatch D>
void executor(benchmark::State& state) {
  net model;
  copy_loss loss;
  call_log first(microbatches), second(microbatches);
  model.layer<0>().log = &first;
  model.layer<1>().log = &second;
  std::vector<stamp::input_type> in(microbatches);
  std::vector<int> targets(microbatches);
  ctpipe::host_executor<naive_2, net, ctpipe::partition<net, 2>(), copy_loss, D> exec(model, loss);
  std::vector<std::int64_t> samples;
  samples.reserve(1 << 22);
  for (auto _ : state) {
    first.rewind();
    second.rewind();
    benchmark::DoNotOptimize(exec.step(in, targets).data());
    state.PauseTiming();
    for (std::size_t mb = 0; mb < microbatches && samples.size() + 2 <= samples.capacity(); ++mb) {
      samples.push_back(second.forward_begin[mb] - first.forward_end[mb]);    // activation, rank 0 -> 1
      samples.push_back(first.backward_begin[mb] - second.backward_end[mb]);  // gradient, rank 1 -> 0
    }
    state.ResumeTiming();
  }
  report(state, samples);
}

// The floor: a timestamp bounced between two threads through one atomic word (even values from
// the caller, odd from the other thread), each side taking the time as it sees the word change.
void floor(benchmark::State& state) {
  struct alignas(64) word {
    std::atomic<std::int64_t> value{0};
  };
  word w;
  std::atomic<bool> stop{false};
  std::vector<std::int64_t> samples;
  samples.reserve(1 << 22);
  std::thread other([&] {
    std::int64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::int64_t v = w.value.load(std::memory_order_acquire);
      if (v == seen || (v & 1)) continue;
      seen = v;
      w.value.store(v + 1, std::memory_order_release);
    }
  });
  std::int64_t k = 0;
  for (auto _ : state) {
    for (int i = 0; i < microbatches; ++i) {
      k += 2;
      const std::int64_t t0 = now_ns();
      w.value.store(k, std::memory_order_release);
      while (w.value.load(std::memory_order_acquire) != k + 1) {
      }
      const std::int64_t t1 = now_ns();
      if (samples.size() < samples.capacity()) samples.push_back((t1 - t0) / 2);  // one way: half the round trip
    }
  }
  stop = true;
  other.join();
  report(state, samples);
}

}  // namespace

BENCHMARK(executor<ctpipe::dispatch::unrolled>)->Name("handoff/executor_unrolled/naive_p2_m64")->UseRealTime();
BENCHMARK(executor<ctpipe::dispatch::table_walk>)->Name("handoff/executor_table_walk/naive_p2_m64")->UseRealTime();
BENCHMARK(floor)->Name("handoff/floor_atomic_ping_pong")->UseRealTime();

BENCHMARK_MAIN();
