// ctpipe::cuda::device_optimizer on a real GPU (exit 77 where there is none): the example's MLP
// trained by two executors from the same start, one updated on the device at the end of each step
// (eager, or replayed from a graph that holds the update), the other by ctpipe::optimizer on host
// copies (the reference). The GPU's kernels are deterministic, so both runs' gradients agree, and
// the device update must give the host's norm, scale, parameters and state to the bit: SGD, SGD
// with momentum, Adam and AdamW, clipped at a norm the gradients exceed. Then mixed precision: the
// MLP computing with bf16 copies of its weights, against float.
#define DOCTEST_CONFIG_IMPLEMENT
#include "fixture.hpp"

#include <ctpipe/cuda/optimizer.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace {

using namespace gpu_test;

// 1F1B at p = 2 on one device for Model: the one executor type of each model here (nvcc 13's front
// end mistranslates the same executor type named again in a second function's body).
template <class Model>
struct one_f_one_b_of {
  static constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, microbatches)>();
  using executor = ctpipe::cuda::executor<table, Model, ctpipe::partition<Model, table.stages()>(), loss>;
};

template <class Rule>
void against_host_copies(Rule rule, ctpipe::cuda::launch how) {
  fixture f;
  using executor = typename one_f_one_b_of<net>::executor;
  const ctpipe::clipping clip{.max_norm = 0.05};
  net a, b;
  f.upload(a);
  f.upload(b);
  loss l;
  executor on_device(a, l), on_host(b, l);
  mlp_gpu::bind_blas(on_device);
  mlp_gpu::bind_blas(on_host);
  ctpipe::cuda::device_optimizer dev(on_device, rule, clip);
  ctpipe::optimizer ref(b, on_host, rule, clip);
  int clipped = 0;
  for (int step = 0; step < 3; ++step) {
    on_device.step(f.dx, f.dt, how);
    on_host.step(f.dx, f.dt);
    const ctpipe::update_result want = ref.step(), got = dev.result();
    CHECK(want.applied == got.applied);
    CHECK(std::memcmp(&want.norm, &got.norm, sizeof(double)) == 0);
    CHECK(want.scale == got.scale);
    clipped += got.scale < 1.0 ? 1 : 0;
    CHECK(mlp_gpu::gradients(a) == mlp_gpu::gradients(b));  // (as each update left them: clipped)
    CHECK(mlp_gpu::parameters(a) == mlp_gpu::parameters(b));
  }
  CHECK(clipped > 0);
  CHECK(dev.updates() == 3);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          for (std::size_t t = 0; t < ref.template tensors<K>().size(); ++t)
            for (std::size_t j = 0; ctpipe::detail::below(j, ctpipe::state_count_v<Rule>); ++j) {
              const auto want = ref.template state<K>(t, j);
              const std::vector<float> got = dev.template state<K>(t, j);
              CHECK(std::equal(want.begin(), want.end(), got.begin(), got.end()));
            }
        }(),
        ...);
  }
  (std::make_index_sequence<net::size>{});
  if (how == ctpipe::cuda::launch::graph) CHECK(on_device.graph_captures() == 1);
}

using mixed_hidden = mlp_gpu::dense<batch, width, width, true, true>;
using mixed_net =
    ctpipe::model<mixed_hidden, mixed_hidden, mixed_hidden, mixed_hidden, mlp_gpu::dense<batch, width, classes, false>>;

// The example's MLP with its four hidden layers computing in bf16 (float master weights, a bf16
// copy widened before each product), trained by the device optimizer beside the float model from
// the same start: each step's mean loss within 1% of the float model's (bf16 keeps 8 bits of
// mantissa: a weight's relative error is at most 2^-9), and after the steps each layer's copy is
// exactly its float weights rounded to bf16 (the update's own kernel writes it).
template <class Mixed = mixed_net>
void bf16_against_float() {
  using float_exec = typename one_f_one_b_of<net>::executor;
  using mixed_exec = typename one_f_one_b_of<Mixed>::executor;
  fixture f;
  net a;
  Mixed b;
  f.upload(a);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (b.template layer<K>().params.upload(f.start.template layer<K>().params), ...);
    (b.template layer<K>().refresh_copy(), ...);
  }
  (std::make_index_sequence<4>{});
  b.template layer<4>().params.upload(f.start.template layer<4>().params);
  loss l;
  float_exec ea(a, l);
  mixed_exec eb(b, l);
  mlp_gpu::bind_blas(ea);
  mlp_gpu::bind_blas(eb);
  ctpipe::cuda::device_optimizer oa(ea, ctpipe::adamw{.lr = 0.01}, {.max_norm = 1.0});
  ctpipe::cuda::device_optimizer ob(eb, ctpipe::adamw{.lr = 0.01}, {.max_norm = 1.0});
  for (int step = 0; step < 5; ++step) {
    const auto la = ea.step(f.dx, f.dt, ctpipe::cuda::launch::graph);
    const double mean_a = std::accumulate(la.begin(), la.end(), 0.0) / static_cast<double>(la.size());
    const auto lb = eb.step(f.dx, f.dt, ctpipe::cuda::launch::graph);
    const double mean_b = std::accumulate(lb.begin(), lb.end(), 0.0) / static_cast<double>(lb.size());
    CAPTURE(step);
    CHECK(std::abs(mean_b - mean_a) <= 0.01 * std::abs(mean_a));
    CHECK(ob.result().applied);
  }
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          const std::vector<float> master = b.template layer<K>().params.download();
          const std::vector<ctpipe::bf16> copy = b.template layer<K>().copy.download();
          for (std::size_t i = 0; i < master.size(); ++i) CHECK(copy[i] == ctpipe::bf16(master[i]));
        }(),
        ...);
  }
  (std::make_index_sequence<4>{});
}

}  // namespace

TEST_CASE("gpu: the device optimizer equals ctpipe::optimizer on host copies to the bit, eager and graph") {
  for (const auto how : {ctpipe::cuda::launch::eager, ctpipe::cuda::launch::graph}) {
    CAPTURE(static_cast<int>(how));
    against_host_copies(ctpipe::sgd{.lr = 0.1, .weight_decay = 0.01}, how);
    against_host_copies(ctpipe::sgd_momentum{.lr = 0.1, .momentum = 0.9, .nesterov = true}, how);
    against_host_copies(ctpipe::adam{.lr = 0.01, .weight_decay = 0.1}, how);
    against_host_copies(ctpipe::adamw{.lr = 0.01}, how);
  }
}

TEST_CASE("gpu: bf16 weights with float masters train within 1% of float, and each copy is its master rounded") {
  bf16_against_float();
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("ctpipe_gpu_optimizer_tests: no CUDA device here: skipped (exit 77)");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
