// Both executors instantiated in a translation unit that nvcc compiles: the host executor trains the
// quickstart's kind of MLP for a step, and the CUDA executor's plan (on the stream simulator's
// backend, so no GPU is needed) is built and checked. The run-time check is in executors_main.cpp.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/runtime.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>

#include "../../support/nccl_sim.hpp"
#include "../../support/sim_mlp.hpp"

#include <ctpipe/nccl/executor.hpp>

#include <algorithm>
#include <span>
#include <vector>

namespace {
using hidden = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<hidden, hidden, ctpipe::layers::dense<4, 8, 3, ctpipe::layers::activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<4, 3>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(3, 6)>();
using host = ctpipe::host_executor<table, net, ctpipe::partition<net, 3>(), loss>;
static_assert(host::dispatch_strategy == ctpipe::dispatch::unrolled);
// Split backward (I, W), V placement and overlapped pairs F&B, compiled by nvcc too.
constexpr auto split_table = ctpipe::make_table<ctpipe::dualpipe_v(1, 6)>();
using split_host = ctpipe::host_executor<split_table, net, ctpipe::partition<net, 2>(), loss>;
// A residual that skips a stage: skip messages, and a graph stage's gather and gradient sums.
using graph_net =
    ctpipe::model<hidden, hidden, ctpipe::node<ctpipe::layers::add<4, 8>, ctpipe::back<1>, ctpipe::back<2>>,
                  ctpipe::layers::dense<4, 8, 3, ctpipe::layers::activation::none>>;
constexpr auto graph_stages = ctpipe::stage_bounds<graph_net, 0, 1, 2, 4>();
constexpr auto graph_table =
    ctpipe::make_table<ctpipe::one_f_one_b(3, 6), ctpipe::model_crossings<graph_net, graph_stages>()>();
using graph_host = ctpipe::host_executor<graph_table, graph_net, graph_stages, loss>;

using sim = ctpipe::cuda::basic_executor<ctpipe::make_table<ctpipe::gpipe(2, 4)>(), test::device::mlp,
                                         ctpipe::partition<test::device::mlp, 2>(), test::device::sim_loss, 0,
                                         ctpipe::dispatch::table_walk, sim::backend>;
static_assert(sim::issue.forward[0] == ctpipe::cuda::handoff::pointer);
// The CUDA executor with split backward and pairs F&B (a second stream per rank), on the simulator.
constexpr auto split_cuda_table = ctpipe::make_table<ctpipe::dualpipe_v(2, 4)>();
using split_sim = ctpipe::cuda::basic_executor<split_cuda_table, test::device::split_mlp,
                                               ctpipe::partition<test::device::split_mlp, 4>(), test::device::sim_loss,
                                               0, ctpipe::dispatch::automatic, ::sim::backend>;
static_assert(split_sim::issue.pairs && split_sim::issue.forward[0] == ctpipe::cuda::handoff::stash_copy);
// The CUDA executor running a graph model (the block MLP: residuals, one of which skips a stage
// at p = 4, and a head tied to layer 0 on another device), on the simulator; and the runtime
// backend's gradient sum (cuBLAS), compiled and linked.
using tied_block = test::device::sim_block_of<false, ctpipe::layers::rows::fixed, true>;
using tied_host_block = test::block_mlp_of<ctpipe::layers::rows::fixed, test::tied_head>;
constexpr auto graph_cuda_stages = test::even_stages<tied_block, 4>();
constexpr auto graph_cuda_table = test::table_for<ctpipe::one_f_one_b(4, 8), tied_block, graph_cuda_stages>();
static_assert(graph_cuda_table.crossings.size() == 1);
using graph_sim =
    ctpipe::cuda::basic_executor<graph_cuda_table, tied_block, graph_cuda_stages,
                                 test::device::sim_loss_for<tied_block>, ctpipe::cuda::device_per_rank<4>(),
                                 ctpipe::dispatch::table_walk, ::sim::backend>;
static_assert(graph_sim::issue.skip_forward[0] == ctpipe::cuda::handoff::ring_copy);
[[maybe_unused]] constexpr auto runtime_add = &ctpipe::cuda::runtime::add<float>;
// DualPipe on the CUDA executor (a mirror model for the second pipeline, the copies' sums across
// two devices), on the simulator.
constexpr auto mirror_table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using mirror_sim =
    ctpipe::cuda::basic_executor<mirror_table, test::device::mlp, ctpipe::partition<test::device::mlp, 2>(),
                                 test::device::sim_loss, ctpipe::cuda::device_per_rank<2>(),
                                 ctpipe::dispatch::automatic, ::sim::backend>;
static_assert(mirror_sim::mirrored);
// The NCCL executor (one process per rank), on the simulator and the NCCL stand-in: DualPipe, whose
// pair of processes sums each stage's two copies.
// (A named table: nvcc 13 mistranslates make_table<...>() inside this alias' template arguments.)
constexpr auto nccl_table = ctpipe::make_table<ctpipe::dualpipe(2, 4)>();
using nccl_sim = ctpipe::nccl::basic_executor<nccl_table, test::device::mlp, ctpipe::partition<test::device::mlp, 2>(),
                                              test::device::sim_loss, ::sim::backend, ::sim::nccl::net>;
}  // namespace

// Losses of one host step of Executor, and whether they equal the sequential reference's, bit for bit.
template <class Executor, class Model = net>
bool step_matches_sequential() {
  Model model, reference;
  ctpipe::for_each_layer(model, [k = 1u](auto& l) mutable {
    if constexpr (requires { l.init(k); }) l.init(k++);
  });
  reference = model;
  loss l;
  std::vector<hidden::input_type> inputs(6);
  std::vector<loss::target_type> targets(6);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (std::size_t j = 0; j < inputs[i].v.size(); ++j) inputs[i].v[j] = static_cast<float>((i * 7 + j) % 5) - 2.0f;
    for (std::size_t b = 0; b < targets[i].size(); ++b) targets[i][b] = static_cast<int>((i + b) % 3);
  }
  Executor exec(model, l);
  const auto losses = exec.step(inputs, targets);
  std::vector<double> expected(6);
  ctpipe::sequential_step(reference, l, std::span<const hidden::input_type>(inputs),
                          std::span<const loss::target_type>(targets), std::span<double>(expected));
  return std::equal(losses.begin(), losses.end(), expected.begin());
}

bool nvcc_host_step_matches_sequential() { return step_matches_sequential<host>(); }
bool nvcc_split_host_step_matches_sequential() { return step_matches_sequential<split_host>(); }
bool nvcc_graph_host_step_matches_sequential() { return step_matches_sequential<graph_host, graph_net>(); }

// One step of the CUDA executor (DualPipeV p = 2 on the stream simulator): its losses against the
// sequential reference's, bit for bit.
bool nvcc_split_cuda_step_matches_sequential() {
  ::sim::world::get().reset(5);
  test::mlp reference = test::make_mlp();
  test::loss l;
  test::device::split_mlp model = test::device::make_mlp<test::device::split_mlp>();
  test::device::sim_loss dl;
  const test::data_set d = test::make_data(split_sim::microbatches);
  const test::device::device_data dd(d);
  std::vector<double> expected(d.inputs.size());
  ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                          std::span<const test::target>(d.targets), std::span<double>(expected));
  split_sim exec(model, dl);
  const auto losses = exec.step(dd.inputs, dd.targets, ctpipe::cuda::launch::graph);
  return std::equal(losses.begin(), losses.end(), expected.begin(), expected.end());
}

// One graph step of the CUDA executor (1F1B p = 4, a device per rank, a skip message across
// devices, a tied head whose copy the executor starts equal): its losses against the sequential
// reference's, bit for bit, and its tied gradients summed.
bool nvcc_graph_cuda_step_matches_sequential() {
  ::sim::world::get().reset(3, 4);
  tied_host_block reference = test::make_mlp<tied_host_block>();
  test::loss_for<tied_host_block> l;
  tied_block model = test::device::make_mlp<tied_block>();
  test::device::sim_loss_for<tied_block> dl;
  const test::data_set d = test::make_data(graph_sim::microbatches);
  const test::device::device_data dd(d, 0, 3);
  std::vector<double> expected(d.inputs.size());
  ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                          std::span<const test::target>(d.targets), std::span<double>(expected));
  graph_sim exec(model, dl);
  const auto losses = exec.step(dd.inputs, dd.targets, ctpipe::cuda::launch::graph);
  const auto g0 = model.layer<0>().shared_gradients(), g9 = model.layer<9>().shared_gradients();
  return std::equal(losses.begin(), losses.end(), expected.begin(), expected.end()) && ::sim::world::get().adds > 0 &&
         std::equal(g0.begin(), g0.end(), g9.begin(), g9.end());
}

// One graph step of the CUDA executor on DualPipe p = 2 (a device per rank, the mirror's stages on
// the other device): its losses against the sequential reference's (the first step's losses do not
// depend on how its gradients are summed), bit for bit, and each stage's two copies holding one sum.
bool nvcc_mirror_cuda_step_matches_sequential() {
  ::sim::world::get().reset(9, 2);
  test::mlp reference = test::make_mlp();
  test::loss l;
  test::device::mlp model = test::device::make_mlp(), mirror = test::device::make_mlp();
  test::device::sim_loss dl;
  const test::data_set d = test::make_data(mirror_sim::microbatches);
  const test::device::device_data dd(d, std::vector<int>{0, 1}, std::vector<int>{1, 0});
  std::vector<double> expected(d.inputs.size());
  ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                          std::span<const test::target>(d.targets), std::span<double>(expected));
  mirror_sim exec(model, mirror, dl);
  const auto losses = exec.step(dd.inputs, dd.targets, ctpipe::cuda::launch::graph);
  return std::equal(losses.begin(), losses.end(), expected.begin(), expected.end()) && ::sim::world::get().adds > 0 &&
         test::gradients(model) == test::gradients(mirror);
}

// One step of a two-process NCCL job (DualPipe p = 2 on the simulator and the NCCL stand-in): every
// process's losses against the sequential reference's, bit for bit, and no NCCL rule broken.
bool nvcc_nccl_step_matches_sequential() {
  ::sim::world::get().reset(7, 2);
  ::sim::nccl::state::get().reset();
  const std::vector<::sim::nccl::handle*> world = ::sim::nccl::make_world(2);
  test::mlp reference = test::make_mlp();
  test::loss l;
  const test::data_set d = test::make_data(nccl_sim::microbatches);
  std::vector<double> expected(d.inputs.size());
  ctpipe::sequential_step(reference, l, std::span<const test::input>(d.inputs),
                          std::span<const test::target>(d.targets), std::span<double>(expected));
  test::device::mlp m0 = test::device::make_mlp(), m1 = test::device::make_mlp();
  test::device::sim_loss l0, l1;
  const test::device::device_data d0(d, 0, 0), d1(d, 1, 1);
  nccl_sim e0(m0, l0, {world[0], 0, 2, 0}), e1(m1, l1, {world[1], 1, 2, 1});
  e0.enqueue(d0.inputs, d0.targets);
  e1.enqueue(d1.inputs, d1.targets);
  bool ok = true;
  for (nccl_sim* e : {&e0, &e1}) {
    const auto losses = e->wait();
    ok = ok && std::equal(losses.begin(), losses.end(), expected.begin(), expected.end());
  }
  return ok && ::sim::nccl::state::get().violations.empty();
}
