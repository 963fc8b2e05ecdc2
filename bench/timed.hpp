// The timed layer of the schedule benchmarks (efficiency.cpp, async.cpp): forward and backward take
// a set time, spinning or sleeping, and add what they took to a shared record; its backward splits
// into I and W. `weighted` adds parameters, for the benchmarks whose optimizer does real work.
#pragma once

#include <ctpipe/ctpipe.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <utility>

namespace bench {

using clock_type = std::chrono::steady_clock;

// Sums of the time the tasks really took, shared by every layer of a run.
struct durations {
  std::atomic<std::int64_t> forward_ns{0}, backward_ns{0}, forwards{0}, backwards{0};
  std::atomic<std::int64_t> weight_ns{0}, weights{0};  // I counts as a backward
};

// A layer whose forward and backward take a set time, spinning or sleeping; its backward splits
// into I (input_time) and W (weight_time), and the full backward takes their sum.
struct timed {
  using input_type = std::array<std::uint64_t, 1>;
  using output_type = std::array<std::uint64_t, 1>;
  static constexpr double cost = 1.0;
  std::chrono::microseconds forward_time{200}, input_time{200}, weight_time{200};
  bool sleep = false;
  durations* record = nullptr;

  void pass(std::chrono::microseconds d, std::atomic<std::int64_t>& sum, std::atomic<std::int64_t>& count) const {
    const auto start = clock_type::now();
    if (sleep)
      std::this_thread::sleep_for(d);
    else
      while (clock_type::now() - start < d) {
      }
    sum.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count(),
                  std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
  }
  void forward(const input_type& x, output_type& y) const {
    pass(forward_time, record->forward_ns, record->forwards);
    y[0] = x[0] + 1;
  }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    pass(input_time + weight_time, record->backward_ns, record->backwards);
    dx[0] = dy[0] + 1;
  }
  void backward_input(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    pass(input_time, record->backward_ns, record->backwards);
    dx[0] = dy[0] + 1;
  }
  void backward_weight(const input_type&, const output_type&, const output_type&) const {
    pass(weight_time, record->weight_ns, record->weights);
  }
};
struct copy_loss {
  using target_type = int;
  double operator()(const timed::output_type& y, int, timed::output_type& dy) const {
    dy[0] = y[0];
    return 0.0;
  }
};

// A timed layer with N float parameters: its backward adds to every gradient (as a layer's
// weight gradient does), so that an update per microbatch costs what touching them costs.
template <std::size_t N>
struct weighted : timed {
  std::array<float, N> w{}, g{};
  std::span<float> parameters() { return w; }
  std::span<float> gradients() { return g; }
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    timed::backward(x, y, dy, dx);
    for (float& v : g) v += 1e-3f;
  }
};

template <class Layer, std::size_t>
using layer_at = Layer;
template <class Layer, std::size_t... I>
auto model_of(std::index_sequence<I...>) -> ctpipe::model<layer_at<Layer, I>...>;
/// Layers copies of Layer.
template <int Layers, class Layer = timed>
using timed_net = decltype(model_of<Layer>(std::make_index_sequence<static_cast<std::size_t>(Layers)>{}));

}  // namespace bench
