// A residual that skips stages, sent directly against carried through the stages between
// (bench/README.md, "Skip connections"). One model, written two ways, on the host executor
// (interleaved, 2 ranks x 2 chunks: four stages, a layer or two each, every boundary between the
// two ranks):
//  - direct: relu -> relu -> relu -> add(., first relu's output) -> head, a graph model: the first
//    layer's output goes from stage 0 straight to stage 3 as a skip message;
//  - relayed: the same arithmetic as a chain: the first layer gives its output twice, and the two
//    middle layers carry the second copy along (tensors<h, h> in and out), as a model must without
//    skip connections.
// Both compute the same losses and gradients (checked before timing); what differs is what crosses
// each boundary. The layers are elementwise (16 x 256 floats, 16 KB a tensor), so the hand-offs
// weigh in the step. Counters: bytes sent between ranks per step (both directions), and the time
// of a step.
#include <benchmark/benchmark.h>

#include <ctpipe/ctpipe.hpp>
#include <ctpipe/exec/detail/graph_stages.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/relu.hpp>

#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

constexpr std::size_t batch = 16, width = 256, classes = 8;
constexpr int ranks = 2, microbatches = 16;
using m_w = ctpipe::layers::matrix<batch, width>;
using inner = ctpipe::layers::relu<batch, width>;
using head = ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>;
using loss = ctpipe::layers::softmax_cross_entropy<batch, classes>;
using add = ctpipe::layers::add<batch, width>;

// ---- relayed: the chain that carries the skip through the middle stages -----------------------
// The first layer, with its output given twice.
struct inner_twice {
  using input_type = m_w;
  using output_type = ctpipe::tensors<m_w, m_w>;
  static constexpr double cost = inner::cost;
  void forward(const input_type& x, output_type& y) const {
    inner{}.forward(x, std::get<0>(y));
    std::get<1>(y) = std::get<0>(y);
  }
  // The two copies' gradients summed as the graph model sums them: the add's (the later reader)
  // first, then the next layer's.
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) const {
    m_w g = std::get<1>(dy);
    g += std::get<0>(dy);
    inner{}.backward(x, std::get<0>(y), g, dx);
  }
};
// A middle layer that carries the skip along.
struct inner_carry {
  using input_type = ctpipe::tensors<m_w, m_w>;
  using output_type = ctpipe::tensors<m_w, m_w>;
  static constexpr double cost = inner::cost;
  void forward(const input_type& x, output_type& y) const {
    inner{}.forward(std::get<0>(x), std::get<0>(y));
    std::get<1>(y) = std::get<1>(x);
  }
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) const {
    inner{}.backward(std::get<0>(x), std::get<0>(y), std::get<0>(dy), std::get<0>(dx));
    std::get<1>(dx) = std::get<1>(dy);
  }
};
// The join, after the carried copy arrives: y = a + b.
struct add_carried {
  using input_type = ctpipe::tensors<m_w, m_w>;
  using output_type = m_w;
  static constexpr double cost = add::cost;
  void forward(const input_type& x, output_type& y) const { add{}.forward(x, y); }
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) const {
    add{}.backward(x, y, dy, dx);
  }
};

using direct_net = ctpipe::model<inner, inner, inner, ctpipe::node<add, ctpipe::back<1>, ctpipe::from<0>>, head>;
using relayed_net = ctpipe::model<inner_twice, inner_carry, inner_carry, add_carried, head>;
constexpr auto direct_stages = ctpipe::stage_bounds<direct_net, 0, 1, 2, 3, 5>();
constexpr auto relayed_stages = ctpipe::stage_bounds<relayed_net, 0, 1, 2, 3, 5>();
constexpr auto schedule = ctpipe::interleaved(ranks, microbatches, 2);
constexpr auto direct_table = ctpipe::make_table<schedule, ctpipe::model_crossings<direct_net, direct_stages>()>();
constexpr auto relayed_table = ctpipe::make_table<schedule>();
using direct_exec = ctpipe::host_executor<direct_table, direct_net, direct_stages, loss>;
using relayed_exec = ctpipe::host_executor<relayed_table, relayed_net, relayed_stages, loss>;
static_assert(ctpipe::model_crossings<direct_net, direct_stages>() == std::array{ctpipe::crossing{0, 3, sizeof(m_w)}});

// Bytes sent between ranks in a step, both directions: each boundary's message (and, direct, the
// skip message) per microbatch, forwards and backwards.
constexpr double direct_bytes = [] {
  using g = ctpipe::detail::graph_stage_types<direct_net, direct_stages>;
  const std::size_t values =
      sizeof(g::message_t<0, 1>) + sizeof(g::message_t<1, 2>) + sizeof(g::message_t<2, 3>) + sizeof(g::message_t<0, 3>);
  const std::size_t grads = sizeof(g::gradient_t<1, 0>) + sizeof(g::gradient_t<2, 1>) + sizeof(g::gradient_t<3, 2>) +
                            sizeof(g::gradient_t<3, 0>);
  return static_cast<double>((values + grads) * microbatches);
}();
constexpr double relayed_bytes = [] {
  const std::size_t values = sizeof(ctpipe::boundary_t<relayed_net, 1>) + sizeof(ctpipe::boundary_t<relayed_net, 2>) +
                             sizeof(ctpipe::boundary_t<relayed_net, 3>);
  return static_cast<double>(2 * values * microbatches);
}();

template <class Net>
Net make_net() {
  Net n;
  std::uint64_t k = 1;
  ctpipe::for_each_layer(n, [&](auto& l) {
    if constexpr (requires { l.init(k); }) l.init(k++);
  });
  return n;
}

struct batch_data {
  std::vector<m_w> inputs = std::vector<m_w>(microbatches);
  std::vector<loss::target_type> targets = std::vector<loss::target_type>(microbatches);
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

// The two ways compute the same step: losses and the head's gradients, to the bit.
void check_same() {
  direct_net dn = make_net<direct_net>();
  relayed_net rn = make_net<relayed_net>();
  loss l;
  const batch_data d;
  direct_exec de(dn, l);
  relayed_exec re(rn, l);
  const auto sa = de.step(d.inputs, d.targets);
  const std::vector<double> a(sa.begin(), sa.end());
  const auto b = re.step(d.inputs, d.targets);
  const auto ga = dn.layer<4>().gradients();
  const auto gb = rn.layer<4>().gradients();
  if (!std::equal(a.begin(), a.end(), b.begin()) || std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)) != 0)
    throw std::logic_error("bench_skip: the direct and relayed models do not compute the same step");
}

template <class Exec, class Net>
void step(benchmark::State& state, double bytes) {
  Net n = make_net<Net>();
  loss l;
  const batch_data d;
  Exec exec(n, l);
  for (auto _ : state) benchmark::DoNotOptimize(exec.step(d.inputs, d.targets).data());
  state.counters["bytes_per_step"] = bytes;
  state.counters["ms_per_step"] = benchmark::Counter(static_cast<double>(state.iterations()) * 1e-3,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void direct(benchmark::State& state) { step<direct_exec, direct_net>(state, direct_bytes); }
void relayed(benchmark::State& state) { step<relayed_exec, relayed_net>(state, relayed_bytes); }
// (Relayed first: the report gives direct's figures as ratios to it.)
BENCHMARK(relayed)->Name("skip/host/relayed")->UseRealTime()->MinTime(0.5);
BENCHMARK(direct)->Name("skip/host/direct")->UseRealTime()->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  check_same();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
