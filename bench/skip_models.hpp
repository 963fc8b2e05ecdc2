// A residual that skips two stages, written two ways with the same arithmetic (bench_skip on
// threads, bench_mpi between processes; bench/README.md, "Skip connections"): interleaved, 2
// ranks x 2 chunks, four stages, every boundary between the two ranks, elementwise layers on
// 16 x 256 floats (16 KB a tensor) so that the hand-offs weigh in the step.
//  - direct: relu -> relu -> relu -> add(., first relu's output) -> head, a graph model: the first
//    layer's output goes from stage 0 straight to stage 3 as a skip message;
//  - relayed: the same arithmetic as a chain: the first layer gives its output twice, and the two
//    middle layers carry the second copy along (tensors<h, h> in and out), as a model must without
//    skip connections.
#pragma once

#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/exec/detail/graph_stages.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/relu.hpp>

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace skip_bench {

constexpr std::size_t width = 256, classes = 8;
constexpr int ranks = 2, microbatches = 16;

// The two models, for tensors of `batch` x 256 floats (bench_skip and bench_mpi run 16 and 256:
// 16 KB and 256 KB a tensor).
template <std::size_t batch>
struct models {
  using m_w = ctpipe::layers::matrix<batch, width>;
  using inner = ctpipe::layers::relu<batch, width>;
  using head = ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>;
  using loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;
  using add = ctpipe::layers::add<batch, width>;

  // ---- relayed: the chain that carries the skip through the middle stages -----------------------
  // The tensor between two layers of the chain: the running value and the carried copy. (A plain
  // struct, trivially copyable, so that the MPI executor can send it as bytes; ctpipe::tensors is a
  // std::tuple, which is not.)
  struct carried {
    m_w value, skip;
  };
  // The first layer, with its output given twice.
  struct inner_twice {
    using input_type = m_w;
    using output_type = carried;
    static constexpr double cost = inner::cost;
    void forward(const input_type& x, output_type& y) const {
      inner{}.forward(x, y.value);
      y.skip = y.value;
    }
    // The two copies' gradients summed as the graph model sums them: the add's (the later reader)
    // first, then the next layer's.
    void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) const {
      m_w g = dy.skip;
      g += dy.value;
      inner{}.backward(x, y.value, g, dx);
    }
  };
  // A middle layer that carries the skip along.
  struct inner_carry {
    using input_type = carried;
    using output_type = carried;
    static constexpr double cost = inner::cost;
    void forward(const input_type& x, output_type& y) const {
      inner{}.forward(x.value, y.value);
      y.skip = x.skip;
    }
    void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) const {
      inner{}.backward(x.value, y.value, dy.value, dx.value);
      dx.skip = dy.skip;
    }
  };
  // The join, after the carried copy arrives: y = value + skip.
  struct add_carried {
    using input_type = carried;
    using output_type = m_w;
    static constexpr double cost = add::cost;
    void forward(const input_type& x, output_type& y) const {
      for (std::size_t i = 0; i < y.v.size(); ++i) y.v[i] = x.value.v[i] + x.skip.v[i];
    }
    void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
      dx.value = dy;
      dx.skip = dy;
    }
  };

  using direct_net = ctpipe::model<inner, inner, inner, ctpipe::node<add, ctpipe::back<1>, ctpipe::from<0>>, head>;
  using relayed_net = ctpipe::model<inner_twice, inner_carry, inner_carry, add_carried, head>;
  static constexpr auto direct_stages = ctpipe::stage_bounds<direct_net, 0, 1, 2, 3, 5>();
  static constexpr auto relayed_stages = ctpipe::stage_bounds<relayed_net, 0, 1, 2, 3, 5>();
  static constexpr auto schedule = ctpipe::interleaved(ranks, microbatches, 2);
  static constexpr auto direct_table =
      ctpipe::make_table<schedule, ctpipe::model_crossings<direct_net, direct_stages>()>();
  static constexpr auto relayed_table = ctpipe::make_table<schedule>();
  static_assert(ctpipe::model_crossings<direct_net, direct_stages>() ==
                std::array{ctpipe::crossing{0, 3, sizeof(m_w)}});

  // Bytes sent between ranks in a step, both directions: each boundary's message (and, direct, the
  // skip message) per microbatch, forwards and backwards.
  static constexpr double direct_bytes = [] {
    using g = ctpipe::detail::graph_stage_types<direct_net, direct_stages>;
    const std::size_t values =
        sizeof(typename g::template message_t<0, 1>) + sizeof(typename g::template message_t<1, 2>) +
        sizeof(typename g::template message_t<2, 3>) + sizeof(typename g::template message_t<0, 3>);
    const std::size_t grads =
        sizeof(typename g::template gradient_t<1, 0>) + sizeof(typename g::template gradient_t<2, 1>) +
        sizeof(typename g::template gradient_t<3, 2>) + sizeof(typename g::template gradient_t<3, 0>);
    return static_cast<double>((values + grads) * microbatches);
  }();
  static constexpr double relayed_bytes = [] {
    const std::size_t values = sizeof(ctpipe::boundary_t<relayed_net, 1>) + sizeof(ctpipe::boundary_t<relayed_net, 2>) +
                               sizeof(ctpipe::boundary_t<relayed_net, 3>);
    return static_cast<double>(2 * values * microbatches);
  }();

  template <class Net>
  static Net make_net() {
    Net n;
    std::uint64_t k = 1;
    ctpipe::for_each_layer(n, [&](auto& l) {
      if constexpr (requires { l.init(k); }) l.init(k++);
    });
    return n;
  }

  // One of the two ways (Direct: the graph model, else the relayed chain): its model, stage plan,
  // table and bytes a step.
  template <bool Direct>
  using net_of = std::conditional_t<Direct, direct_net, relayed_net>;
  template <bool Direct>
  static constexpr auto stages_of = [] {
    if constexpr (Direct)
      return direct_stages;
    else
      return relayed_stages;
  }();
  template <bool Direct>
  static constexpr auto table_of = [] {
    if constexpr (Direct)
      return direct_table;
    else
      return relayed_table;
  }();
  template <bool Direct>
  static constexpr double bytes_of = Direct ? direct_bytes : relayed_bytes;

  struct batch_data;
  // Times steps of way Direct on Exec (an executor of net_of<Direct>, table_of<Direct> and
  // stages_of<Direct>): counters bytes_per_step and ms_per_step.
  template <bool Direct, class Exec>
  static void time_steps(benchmark::State& state) {
    auto n = make_net<net_of<Direct>>();
    loss l;
    const batch_data d;
    Exec exec(n, l);
    for (auto _ : state) benchmark::DoNotOptimize(exec.step(d.inputs, d.targets).data());
    state.counters["bytes_per_step"] = bytes_of<Direct>;
    state.counters["ms_per_step"] = benchmark::Counter(static_cast<double>(state.iterations()) * 1e-3,
                                                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  }

  struct batch_data {
    std::vector<m_w> inputs = std::vector<m_w>(microbatches);
    std::vector<typename loss::target_type> targets = std::vector<typename loss::target_type>(microbatches);
    batch_data() {
      for (int i = 0; i < microbatches; ++i) {
        for (std::size_t j = 0; j < inputs[static_cast<std::size_t>(i)].v.size(); ++j)
          inputs[static_cast<std::size_t>(i)].v[j] =
              static_cast<float>((static_cast<std::size_t>(i) * 31 + j) % 17) / 17.0f - 0.5f;
        for (std::size_t b = 0; b < batch; ++b)
          targets[static_cast<std::size_t>(i)][b] = static_cast<int>((b + i) % classes);
      }
    }
  };
};

}  // namespace skip_bench
