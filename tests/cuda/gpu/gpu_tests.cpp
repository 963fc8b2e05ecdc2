// The CUDA executor on a real GPU (exit 77 where there is none): every schedule's gradients equal
// to the one-rank run's, bit for bit (the kernels are deterministic), and to the host's within
// 1e-4 relative (gradients: or 1e-5 of the largest); graph replay equal to eager issue; DualPipe
// with a mirror model equal to its two halves' one-rank runs; a model with
// saved state and dropout the same way; ranks on one device overlapping (timed with events); ranks
// on two devices (peer copies) where two are present; a step recorded (record_steps) on the GPU's clock;
// ctpipe::optimizer through the runtime's copies equal to the host optimizer on the same gradients, and a checkpoint of
// the device model loaded into the host model.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "fixture.hpp"

#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/dropout.hpp>
#include <ctpipe/layers/layer_norm.hpp>
#include <ctpipe/optim/checkpoint.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace gpu_test;

// One step of the host model `h` (the device run's start) against the device run's losses and
// gradients: losses within 1e-4 relative; gradients within 1e-4 relative, or 1e-5 of the largest
// gradient where a sum cancels (cuBLAS adds the same products in another order than the host's loops).
template <class HostModel>
void check_against_host(const fixture& f, HostModel h, const std::pair<std::vector<double>, std::vector<float>>& got) {
  host_loss hl;
  std::vector<double> hlosses(microbatches);
  ctpipe::sequential_step(h, hl, std::span<const host_net::input_type>(f.inputs),
                          std::span<const host_loss::target_type>(f.targets), std::span<double>(hlosses));
  std::vector<float> hgrads;
  ctpipe::for_each_parameter(h, [&](auto, auto g) {
    for (float v : g) hgrads.push_back(v);
  });
  REQUIRE(hgrads.size() == got.second.size());
  for (std::size_t i = 0; i < hlosses.size(); ++i)
    CHECK(std::abs(got.first[i] - hlosses[i]) <= 1e-4 * std::abs(hlosses[i]));
  float largest = 0.0f;
  for (float g : hgrads) largest = std::max(largest, std::abs(g));
  for (std::size_t i = 0; i < hgrads.size(); ++i)
    CHECK(std::abs(got.second[i] - hgrads[i]) <= 1e-4f * std::abs(hgrads[i]) + 1e-5f * largest);
}

}  // namespace

TEST_CASE(
    "gpu: every schedule's losses and gradients equal the one-rank run's, eager and graph, and the host's within 1e-4") {
  fixture f;
  using ctpipe::cuda::launch;
  const auto reference = f.run<ctpipe::naive(1, microbatches)>(launch::eager);
  check_against_host(f, f.start, reference);
  for (launch how : {launch::eager, launch::graph}) {
    CAPTURE(static_cast<int>(how));
    CHECK(f.run<ctpipe::gpipe(4, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::one_f_one_b(2, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::one_f_one_b(4, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::interleaved(2, microbatches, 2)>(how) == reference);
    // Split backward (the layers split: I then W), V placement, and pairs F&B on two streams.
    CHECK(f.run<ctpipe::zb_h1(2, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::zb_h2(4, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::interleaved_zero_bubble(2, microbatches, 2)>(how) == reference);
    CHECK(f.run<ctpipe::zb_v(2, microbatches)>(how) == reference);
    CHECK(f.run<ctpipe::dualpipe_v(2, microbatches)>(how) == reference);
  }
}

// DualPipe on one device (both ranks' streams), the second pipeline's layers in a mirror model:
// losses and gradients equal to the two halves' one-rank runs, bit for bit, eager and graph.
TEST_CASE("gpu: dualpipe with a mirror model equals the two halves' one-rank runs, eager and graph") {
  fixture f;
  using ctpipe::cuda::launch;
  const auto reference = f.halves();
  for (launch how : {launch::eager, launch::graph}) {
    CAPTURE(static_cast<int>(how));
    CHECK(f.run_mirrored<ctpipe::dualpipe(2, microbatches)>(how) == reference);
  }
}

// A model with saved state (the layer norm keeps its statistics in device memory per microbatch)
// and a dropout that draws its mask in the kernel from the step the executor writes to device
// memory, trained three steps: every schedule equal to the one-rank run bit for bit, eager and
// replayed from one graph, and to the host's layers (ctpipe::layers::layer_norm and dropout, the
// same masks) within 1e-4.
namespace {
using host_stateful = ctpipe::model<host_hidden, ctpipe::layers::layer_norm<batch, width>, host_hidden,
                                    ctpipe::layers::dropout<batch, width, 100>, host_hidden,
                                    ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>>;
using stateful = ctpipe::model<hidden, mlp_gpu::layer_norm<batch, width>, hidden, mlp_gpu::dropout<batch, width, 100>,
                               hidden, mlp_gpu::dense<batch, width, classes, false>>;
constexpr int stateful_steps = 3;
constexpr float stateful_rate = 0.05f;

host_stateful stateful_start() {
  host_stateful h;
  unsigned seed = 3;
  ctpipe::for_each_layer(h, [&](auto& l) {
    if constexpr (requires { l.init(seed); }) l.init(seed++);
  });
  return h;
}

// Every step's losses, then the last step's gradients.
template <auto Schedule>
std::pair<std::vector<double>, std::vector<float>> run_stateful(fixture& f, ctpipe::cuda::launch how) {
  constexpr auto table = ctpipe::make_table<Schedule>();
  using executor = ctpipe::cuda::executor<table, stateful, ctpipe::partition<stateful, table.stages()>(), loss, 0>;
  stateful m;
  const host_stateful start = stateful_start();
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    const auto one = [&](auto& dl, const auto& hl) {
      if constexpr (requires { dl.params.upload(hl.params); }) dl.params.upload(hl.params);
    };
    (one(m.template layer<K>(), start.template layer<K>()), ...);
  }
  (std::make_index_sequence<stateful::size>{});
  loss l;
  executor exec(m, l);
  mlp_gpu::bind_blas(exec);
  std::vector<double> losses;
  std::vector<float> grads;
  for (int step = 0; step < stateful_steps; ++step) {
    const auto lv = exec.step(f.dx, f.dt, how);
    losses.insert(losses.end(), lv.begin(), lv.end());
    grads = mlp_gpu::gradients(m);
    mlp_gpu::sgd_step(m, stateful_rate, nullptr);
    mlp_gpu::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  if (how == ctpipe::cuda::launch::graph) CHECK(exec.graph_captures() == 1);  // the step number is device data
  return {losses, grads};
}
}  // namespace

TEST_CASE("gpu: saved state and dropout: every schedule equals the one-rank run, eager and graph, and the host's") {
  fixture f;
  using ctpipe::cuda::launch;
  const auto reference = run_stateful<ctpipe::naive(1, microbatches)>(f, launch::eager);
  host_stateful h = stateful_start();
  host_loss hl;
  std::vector<double> hlosses(microbatches), all;
  std::vector<float> hgrads;
  for (int step = 0; step < stateful_steps; ++step) {
    ctpipe::sequential_step(h, hl, std::span<const host_net::input_type>(f.inputs),
                            std::span<const host_loss::target_type>(f.targets), std::span<double>(hlosses),
                            {static_cast<std::uint64_t>(step), 0});
    all.insert(all.end(), hlosses.begin(), hlosses.end());
    hgrads.clear();
    ctpipe::for_each_parameter(h, [&](auto, auto g) {
      for (float v : g) hgrads.push_back(v);
    });
    ctpipe::sgd_step(h, stateful_rate);
  }
  REQUIRE(all.size() == reference.first.size());
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(std::abs(reference.first[i] - all[i]) <= 1e-4 * std::abs(all[i]));
  REQUIRE(hgrads.size() == reference.second.size());
  float largest = 0.0f;
  for (float g : hgrads) largest = std::max(largest, std::abs(g));
  for (std::size_t i = 0; i < hgrads.size(); ++i)
    CHECK(std::abs(reference.second[i] - hgrads[i]) <= 1e-3f * std::abs(hgrads[i]) + 1e-4f * largest);
  for (launch how : {launch::eager, launch::graph}) {
    CAPTURE(static_cast<int>(how));
    CHECK(run_stateful<ctpipe::one_f_one_b(2, microbatches)>(f, how) == reference);
    CHECK(run_stateful<ctpipe::zb_h1(2, microbatches)>(f, how) == reference);
    CHECK(run_stateful<ctpipe::zb_v(2, microbatches)>(f, how) == reference);
    CHECK(run_stateful<ctpipe::dualpipe_v(2, microbatches)>(f, how) == reference);
  }
}

// A residual that skips two stages (layer 3 adds layer 2's output to layer 0's): at p = 4 stage 0
// sends stage 3 a skip message, and stage 0 adds the gradient terms of its two readers on the GPU
// (the runtime's cuBLAS axpy). Every schedule equals the one-rank run bit for bit (whose sum is the
// same addition), eager and replayed, and the host's layers (ctpipe::layers::add) within 1e-4.
namespace {
using host_residual = ctpipe::model<host_hidden, host_hidden, host_hidden,
                                    ctpipe::node<ctpipe::layers::add<batch, width>, ctpipe::back<1>, ctpipe::back<3>>,
                                    ctpipe::layers::dense<batch, width, classes, ctpipe::layers::activation::none>>;
using residual = ctpipe::model<hidden, hidden, hidden,
                               ctpipe::node<mlp_gpu::residual_add<batch, width>, ctpipe::back<1>, ctpipe::back<3>>,
                               mlp_gpu::dense<batch, width, classes, false>>;

// One step: losses and gradients. Stages of one layer each but the last (layers 3 and 4).
template <auto Schedule>
std::pair<std::vector<double>, std::vector<float>> run_residual(fixture& f, ctpipe::cuda::launch how) {
  constexpr auto stages = [] {
    if constexpr (Schedule.stages() == 1)
      return ctpipe::stage_bounds<residual, 0, 5>();
    else
      return ctpipe::stage_bounds<residual, 0, 1, 2, 3, 5>();
  }();
  constexpr auto table = ctpipe::make_table<Schedule, ctpipe::model_crossings<residual, stages>()>();
  using executor = ctpipe::cuda::executor<table, residual, stages, loss, 0>;
  residual m;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    const auto one = [&](auto& dl, const auto& hl) { dl.params.upload(hl.params); };
    (one(m.template layer<K>(), f.start.template layer<K>()), ...);
  }
  (std::make_index_sequence<3>{});
  m.template layer<4>().params.upload(f.start.template layer<4>().params);
  loss l;
  executor exec(m, l);
  mlp_gpu::bind_blas(exec);
  auto losses = exec.step(f.dx, f.dt, how);
  std::vector<double> lv(losses.begin(), losses.end());
  if (how == ctpipe::cuda::launch::graph) {
    losses = exec.step(f.dx, f.dt, how);
    CHECK(std::equal(lv.begin(), lv.end(), losses.begin(), losses.end()));
  }
  return {lv, mlp_gpu::gradients(m)};
}
}  // namespace

TEST_CASE("gpu: a residual that skips stages: every schedule equals the one-rank run, and the host's within 1e-4") {
  fixture f;
  using ctpipe::cuda::launch;
  static_assert(ctpipe::model_crossings<residual, ctpipe::stage_bounds<residual, 0, 1, 2, 3, 5>()>().size() == 1);
  const auto reference = run_residual<ctpipe::naive(1, microbatches)>(f, launch::eager);
  host_residual h;
  [&]<std::size_t... K>(std::index_sequence<K...>) { ((h.template layer<K>() = f.start.template layer<K>()), ...); }
  (std::make_index_sequence<3>{});
  h.template layer<4>() = f.start.template layer<4>();
  check_against_host(f, h, reference);
  for (launch how : {launch::eager, launch::graph}) {
    CAPTURE(static_cast<int>(how));
    CHECK(run_residual<ctpipe::one_f_one_b(4, microbatches)>(f, how) == reference);
    CHECK(run_residual<ctpipe::gpipe(4, microbatches)>(f, how) == reference);
    CHECK(run_residual<ctpipe::interleaved(2, microbatches, 2)>(f, how) == reference);
    CHECK(run_residual<ctpipe::zb_h1(4, microbatches)>(f, how) == reference);
    CHECK(run_residual<ctpipe::zb_v(2, microbatches)>(f, how) == reference);
  }
}

TEST_CASE("gpu: ranks on two devices (peer copies) give the one-device result") {
  int n = 0;
  cudaGetDeviceCount(&n);
  if (n < 2) {
    MESSAGE("one device only: the two-device case is not run");
    return;
  }
  fixture f;
  using ctpipe::cuda::launch;
  const auto one = f.run<ctpipe::one_f_one_b(2, microbatches)>(launch::eager);
  CHECK(f.run<ctpipe::one_f_one_b(2, microbatches), ctpipe::cuda::device_per_rank<2>()>(launch::eager) == one);
  CHECK(f.run<ctpipe::one_f_one_b(2, microbatches), ctpipe::cuda::device_per_rank<2>()>(launch::graph) == one);
}

namespace {
// A layer that only spins on one thread: F and B each `cycles` clock cycles.
inline long long spin_cycles = 2'000'000;
struct spin_layer {
  using input_type = ctpipe::cuda::tensor<float, 1>;
  using output_type = ctpipe::cuda::tensor<float, 1>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context& c, const input_type&, output_type&) {
    mlp_kernels::spin(spin_cycles, c.stream);
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type&,
                input_type&) {
    mlp_kernels::spin(spin_cycles, c.stream);
  }
};
struct spin_loss {
  using target_type = ctpipe::cuda::tensor<int, 1>;
  void operator()(const ctpipe::cuda::context&, const spin_layer::output_type&, const target_type&,
                  spin_layer::output_type&, double*) const {}
};
}  // namespace

TEST_CASE("gpu: ranks on one device overlap (GPipe p=2 m=8 of one-thread kernels: elapsed well under the serial sum)") {
  using spin_net = ctpipe::model<spin_layer, spin_layer>;
  constexpr auto table = ctpipe::make_table<ctpipe::gpipe(2, 8)>();
  using executor = ctpipe::cuda::executor<table, spin_net, ctpipe::partition<spin_net, 2>(), spin_loss>;
  spin_net m;
  spin_loss l;
  executor exec(m, l);
  float* buf = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float));
  std::vector<spin_layer::input_type> in(8, {buf});
  std::vector<spin_loss::target_type> tg(8, {reinterpret_cast<int*>(buf + 32)});
  exec.step(in, tg);  // warm-up
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  // One kernel alone.
  cudaEventRecord(a, exec.origin_stream());
  mlp_kernels::spin(spin_cycles, exec.origin_stream());
  cudaEventRecord(b, exec.origin_stream());
  cudaEventSynchronize(b);
  float one = 0.0f;
  cudaEventElapsedTime(&one, a, b);
  // A step: 2 stages x 8 microbatches x (F + B) = 32 kernels; serial 32 x one, pipelined ~18 x one.
  cudaEventRecord(a, exec.origin_stream());
  exec.enqueue(in, tg);
  cudaEventRecord(b, exec.origin_stream());
  exec.wait();
  cudaEventSynchronize(b);
  float step = 0.0f;
  cudaEventElapsedTime(&step, a, b);
  const double ratio = step / (32.0 * one);
  MESSAGE("one kernel " << one << " ms, step " << step << " ms, step / serial sum " << ratio
                        << " (ideal 18/32 = 0.56)");
  CHECK(ratio < 0.75);
  // The same step recorded (record_steps): every task ran, in its rank's order; each F and B took
  // at least about its kernel's time; the table replayed with these times against the step.
  exec.record_steps(true);
  exec.step(in, tg);
  const ctpipe::measured_step& rec = exec.recorded_step();
  REQUIRE(rec.ranks.size() == 2);
  for (int r = 0; r < 2; ++r) {
    const auto prog = executor::plan.table.program(r);
    const auto& row = rec.ranks[static_cast<std::size_t>(r)];
    REQUIRE(row.size() == prog.size());
    for (std::size_t i = 0; i < row.size(); ++i) {
      CHECK(row[i].ran());
      if (i > 0) CHECK(row[i].start >= row[i - 1].end - 1e-6);  // (the events' resolution: about 0.5 us)
      if (ctpipe::is_compute(prog[i].op)) CHECK(row[i].end - row[i].start >= 0.5e-3 * one);
    }
  }
  const auto cmp = ctpipe::compare_measured(executor::plan.table, rec);
  MESSAGE("recorded step " << 1e3 * cmp.measured << " ms, the table replayed with its task times " << 1e3 * cmp.replayed
                           << " ms: measured / replayed " << cmp.measured / cmp.replayed);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(buf);
}

namespace {
// Extents on a real device: a layer that records, for each of its tasks, the extent it reads in
// device memory (a copy captured into the graph reads the words a replay's step wrote), and checks
// the host's copy of it in eager steps; its forward copies the used rows (all of them while
// captured), its backward the gradient.
constexpr int probe_tokens = 8, probe_width = 32, probe_microbatches = 4, probe_layers = 4;
using probe_tensor = ctpipe::cuda::token_tensor<float, probe_tokens, probe_width>;
inline int* probe_seen = nullptr;            // device: [layer][F, B][microbatch] the extent read there
inline const int* probe_expected = nullptr;  // host: the step's extents
inline int probe_host_wrong = 0;             // eager tasks whose host_extent was not the extent
struct probe_layer {
  using input_type = probe_tensor;
  using output_type = probe_tensor;
  static constexpr double cost = 1.0;
  static void record(const ctpipe::cuda::context& c, int op) {
    if (c.host_extent != 0 && c.host_extent != probe_expected[c.microbatch]) ++probe_host_wrong;
    mlp_gpu::cuda_check(cudaMemcpyAsync(probe_seen + (c.layer * 2 + op) * probe_microbatches + c.microbatch, c.extent,
                                        sizeof(int), cudaMemcpyDeviceToDevice, c.stream),
                        "cudaMemcpyAsync (probe)");
  }
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    record(c, 0);
    const int rows = c.host_extent != 0 ? c.host_extent : probe_tokens;
    mlp_gpu::cuda_check(cudaMemcpyAsync(y.data, x.data, sizeof(float) * probe_width * static_cast<std::size_t>(rows),
                                        cudaMemcpyDeviceToDevice, c.stream),
                        "cudaMemcpyAsync (probe)");
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) {
    record(c, 1);
    mlp_gpu::cuda_check(cudaMemcpyAsync(dx.data, dy.data, probe_tensor::bytes, cudaMemcpyDeviceToDevice, c.stream),
                        "cudaMemcpyAsync (probe)");
  }
};
struct probe_loss {
  using target_type = ctpipe::cuda::tensor<int, 1>;
  void operator()(const ctpipe::cuda::context& c, const probe_tensor&, const target_type&, probe_tensor& dy,
                  double* loss) const {
    mlp_gpu::cuda_check(cudaMemsetAsync(dy.data, 0, probe_tensor::bytes, c.stream), "cudaMemsetAsync (probe)");
    mlp_gpu::cuda_check(cudaMemsetAsync(loss, 0, sizeof(double), c.stream), "cudaMemsetAsync (probe)");
  }
};
}  // namespace

TEST_CASE("gpu: extents reach every task as device data, and one graph replays steps of other extents") {
  using probe_net = ctpipe::model<probe_layer, probe_layer, probe_layer, probe_layer>;
  static_assert(probe_net::token_capacity == probe_tokens);
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, probe_microbatches)>();
  using executor = ctpipe::cuda::executor<table, probe_net, ctpipe::partition<probe_net, 2>(), probe_loss>;
  probe_net m;
  probe_loss l;
  executor exec(m, l);
  float* x = nullptr;
  int* t = nullptr;
  mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&x), probe_microbatches * probe_tensor::bytes), "cudaMalloc");
  mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&t), sizeof(int)), "cudaMalloc");
  mlp_gpu::cuda_check(
      cudaMalloc(reinterpret_cast<void**>(&probe_seen), sizeof(int) * 2 * probe_layers * probe_microbatches),
      "cudaMalloc");
  std::vector<probe_tensor> in;
  for (int i = 0; i < probe_microbatches; ++i) in.push_back({x + i * probe_tokens * probe_width});
  const std::vector<probe_loss::target_type> tg(probe_microbatches, {t});
  using ctpipe::cuda::launch;
  const std::vector<std::pair<std::vector<int>, launch>> steps{{{1, 8, 3, 5}, launch::eager},
                                                               {{2, 2, 7, 4}, launch::graph},
                                                               {{8, 1, 1, 6}, launch::graph},
                                                               {{3, 4, 5, 6}, launch::eager},
                                                               {{5, 5, 2, 1}, launch::graph}};
  for (const auto& step : steps) {
    const std::vector<int>& e = step.first;
    const launch how = step.second;  // (not a structured binding: clang 14 cannot capture one, as CAPTURE does)
    CAPTURE(static_cast<int>(how));
    probe_expected = e.data();
    mlp_gpu::cuda_check(cudaMemset(probe_seen, 0, sizeof(int) * 2 * probe_layers * probe_microbatches), "cudaMemset");
    const ctpipe::token_losses r = exec.step(in, tg, e, how);
    CHECK(std::vector<int>(r.tokens.begin(), r.tokens.end()) == e);
    std::vector<int> seen(2 * probe_layers * probe_microbatches);
    mlp_gpu::cuda_check(cudaMemcpy(seen.data(), probe_seen, sizeof(int) * seen.size(), cudaMemcpyDeviceToHost),
                        "cudaMemcpy");
    for (std::size_t k = 0; k < seen.size(); ++k) CHECK(seen[k] == e[k % probe_microbatches]);
  }
  CHECK(exec.graph_captures() == 1);
  CHECK(probe_host_wrong == 0);
  cudaFree(probe_seen);
  probe_seen = nullptr;
  cudaFree(x);
  cudaFree(t);
}

// ctpipe::optimizer on device layers: the gradients and parameters copied to the host on the ranks'
// streams, clipped AdamW there, the parameters copied back. Each update must equal, to the bit, the
// same optimizer on a host model given the device's gradients (the arithmetic is the same host code;
// the copies must move the right bytes at the right time); a checkpoint of the device model then
// loads into the host model with the device's parameters.
TEST_CASE(
    "gpu: ctpipe::optimizer on device layers equals the host optimizer on the same gradients, a checkpoint "
    "loads into the host model") {
  fixture f;
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, microbatches)>();
  using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, table.stages()>(), loss>;
  net m;
  f.upload(m);
  loss l;
  executor exec(m, l);
  mlp_gpu::bind_blas(exec);
  host_net shadow = f.start;
  const ctpipe::clipping clip{.max_norm = 0.05};
  ctpipe::optimizer opt(m, exec, ctpipe::adamw{.lr = 0.01}, clip);
  ctpipe::optimizer ref(shadow, ctpipe::adamw{.lr = 0.01}, clip);
  const auto host_parameters = [](host_net& h) {
    std::vector<float> v;
    ctpipe::for_each_parameter(h, [&](auto w, auto) {
      for (float x : w) v.push_back(x);
    });
    return v;
  };
  int clipped = 0;
  for (int step = 0; step < 3; ++step) {
    exec.step(f.dx, f.dt);
    const std::vector<float> g = mlp_gpu::gradients(m);
    std::size_t at = 0;
    ctpipe::for_each_parameter(shadow, [&](auto, auto sg) {
      std::copy_n(g.begin() + static_cast<std::ptrdiff_t>(at), sg.size(), sg.begin());
      at += sg.size();
    });
    const ctpipe::update_result a = opt.step(), b = ref.step();
    CHECK(a.applied == b.applied);
    CHECK(a.norm == b.norm);
    CHECK(a.scale == b.scale);
    clipped += a.scale < 1.0 ? 1 : 0;
    CHECK(mlp_gpu::parameters(m) == host_parameters(shadow));
  }
  CHECK(clipped > 0);
  const std::string file = (std::filesystem::temp_directory_path() / "ctpipe_gpu_checkpoint.safetensors").string();
  ctpipe::save_checkpoint(file, opt, {exec.context_origin(), ""});
  host_net h;
  ctpipe::optimizer hopt(h, ctpipe::adamw{.lr = 0.01}, clip);
  CHECK(ctpipe::load_checkpoint(file, hopt).origin.step == 3);
  CHECK(host_parameters(h) == mlp_gpu::parameters(m));
  CHECK(hopt.updates() == 3);
  std::filesystem::remove(file);
}

// evaluate() and predict() through the forward-only table of interleaved p = 2, v = 2 on one device
// (a stage reading its producer's slot in place on the same rank, messages between ranks copied into
// rings): the losses equal those of a training step on the same parameters to the bit (the same
// kernels in the same order), eager and replayed from a graph, and the host's within 1e-4, as the
// outputs are; the gradients are left as they were.
TEST_CASE("gpu: evaluate and predict equal a training step's losses bitwise and the host's within 1e-4") {
  fixture f;
  using ctpipe::cuda::launch;
  constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, microbatches, 2)>();
  using executor = ctpipe::cuda::executor<table, net, ctpipe::partition<net, table.stages()>(), loss>;
  net m;
  f.upload(m);
  loss l;
  executor exec(m, l);
  mlp_gpu::bind_blas(exec);
  const std::vector<float> gradients = mlp_gpu::gradients(m);
  const auto eager = exec.evaluate(f.dx, f.dt);
  const std::vector<double> evaluated(eager.begin(), eager.end());
  for (int pass = 0; pass < 2; ++pass) {  // captured, then replayed
    const auto g = exec.evaluate(f.dx, f.dt, launch::graph);
    CHECK(std::vector<double>(g.begin(), g.end()) == evaluated);
  }
  CHECK(mlp_gpu::gradients(m) == gradients);
  CHECK(exec.context_origin().step == 0);
  host_loss hl;
  std::vector<double> want(microbatches);
  ctpipe::sequential_evaluate(f.start, hl, std::span<const host_net::input_type>(f.inputs),
                              std::span<const host_loss::target_type>(f.targets), {}, std::span<double>(want), {0, 0});
  for (std::size_t i = 0; i < microbatches; ++i) CHECK(std::abs(evaluated[i] - want[i]) <= 1e-4 * std::abs(want[i]));
  float* out = nullptr;
  mlp_gpu::cuda_check(cudaMalloc(reinterpret_cast<void**>(&out), microbatches * net::output_type::bytes), "cudaMalloc");
  std::vector<net::output_type> outputs;
  for (std::size_t i = 0; i < microbatches; ++i) outputs.push_back({out + i * net::output_type::size});
  exec.predict(f.dx, outputs);
  std::vector<float> got(microbatches * net::output_type::size);
  mlp_gpu::cuda_check(cudaMemcpy(got.data(), out, microbatches * net::output_type::bytes, cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
  cudaFree(out);
  std::vector<host_net::output_type> host_out(microbatches);
  ctpipe::sequential_predict(f.start, std::span<const host_net::input_type>(f.inputs), {},
                             std::span<host_net::output_type>(host_out), {0, 0});
  for (std::size_t i = 0; i < microbatches; ++i)
    for (std::size_t k = 0; k < net::output_type::size; ++k)
      CHECK(std::abs(got[i * net::output_type::size + k] - host_out[i].v[k]) <=
            1e-4f * std::max(1.0f, std::abs(host_out[i].v[k])));
  const auto trained = exec.step(f.dx, f.dt);
  CHECK(std::vector<double>(trained.begin(), trained.end()) == evaluated);
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("ctpipe_gpu_tests: no CUDA device here: skipped (exit 77)");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
