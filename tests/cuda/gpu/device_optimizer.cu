// ctpipe::cuda::device_optimizer on a real GPU (exit 77 where there is none): the example's MLP
// trained by two executors from the same start, one updated on the device at the end of each step
// (eager, or replayed from a graph that holds the update), the other by ctpipe::optimizer on host
// copies (the reference). The GPU's kernels are deterministic, so both runs' gradients agree, and
// the device update must give the host's norm, scale, parameters and state to the bit: SGD, SGD
// with momentum, Adam and AdamW, clipped at a norm the gradients exceed.
#define DOCTEST_CONFIG_IMPLEMENT
#include "fixture.hpp"

#include <ctpipe/cuda/optimizer.hpp>

#include <cstdio>
#include <cstring>

namespace {

using namespace gpu_test;

template <class Rule>
void against_host_copies(Rule rule, ctpipe::cuda::launch how) {
  fixture f;
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, microbatches)>();
  using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, table.stages()>(), loss>;
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

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("ctpipe_gpu_optimizer_tests: no CUDA device here: skipped (exit 77)");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
