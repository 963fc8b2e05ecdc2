// Saved state and the layer context on the CUDA executor (stream simulator): each microbatch's state
// lives in device memory from its F to its B, or to its I and then its W, never overwritten before
// its last reader (the probe of support/probe.hpp, checked inside the simulated kernels), on one
// device and on a device per rank, eager and replayed from a graph; the context a device layer gets,
// with the step's number read from device memory, new at every replay of one graph; the bytes the
// executor allocates for saved state.
#include "support/probe.hpp"
#include "support/sim_numerics.hpp"

#include <cstdint>

namespace {

using ctpipe::cuda::launch;
using test::batch, test::features, test::hidden, test::classes;
using test::device::sim_of, test::device::sim_dense, test::device::sim_split_dense, test::device::sim_loss;
using probe_in = sim_of<test::probe<batch, features>, true>;
using probe_mid = sim_of<test::probe<batch, hidden>, true>;
using probed =
    ctpipe::model<probe_in, sim_split_dense<batch, features, hidden>,
                  sim_of<ctpipe::layers::layer_norm<batch, hidden>, true>, probe_mid, sim_dense<batch, hidden, hidden>,
                  sim_of<ctpipe::layers::causal_attention<batch, hidden>, true>, probe_mid,
                  sim_split_dense<batch, hidden, hidden>, probe_mid,
                  sim_split_dense<batch, hidden, classes, test::activation::none>>;
constexpr int probes = 4;

template <auto Table, auto Placement>
void check_liveness(int devices, launch how) {
  using exec_t = test::device::sim_executor<Table, Placement, ctpipe::dispatch::table_walk, probed>;
  for (unsigned seed : {1u, 2u}) {
    CAPTURE(seed);
    sim::world::get().reset(seed, devices);
    auto m = test::device::make_mlp<probed>();
    sim_loss l;
    const test::data_set d = test::make_data(exec_t::microbatches);
    const test::device::device_data dd(d, exec_t::devices[0],
                                       exec_t::devices[static_cast<std::size_t>(exec_t::plan.table.stage_rank.back())]);
    exec_t exec(m, l);
    for (int step = 0; step < 3; ++step) {
      test::counts.reset();
      exec.step(dd.inputs, dd.targets, how);
      CHECK(test::counts.wrong.load() == 0);
      CHECK(test::counts.writes.load() == probes * exec_t::microbatches);
      CHECK(test::counts.full.load() + test::counts.input.load() == probes * exec_t::microbatches);
      CHECK(test::counts.weight.load() == test::counts.input.load());
    }
    CHECK(sim::world::get().wrong_device_work.empty());
  }
}

template <auto Schedule>
void check_schedule() {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr std::size_t p = table.static_ranks;
  for (launch how : {launch::eager, launch::graph}) {
    check_liveness<table, 0>(1, how);
    check_liveness<table, ctpipe::cuda::device_per_rank<p>()>(static_cast<int>(p), how);
  }
}

}  // namespace

TEST_CASE("cuda executor (simulated): saved state written by F, read by B or by I then W, never overwritten early") {
  constexpr int m = test::microbatches;
  SUBCASE("1F1B") { check_schedule<ctpipe::one_f_one_b(2, m)>(); }
  SUBCASE("interleaved") { check_schedule<ctpipe::interleaved(2, m, 2)>(); }
  SUBCASE("ZB-H1") { check_schedule<ctpipe::zb_h1(2, m)>(); }
  SUBCASE("ZB-V") { check_schedule<ctpipe::zb_v(2, m)>(); }
  SUBCASE("DualPipeV (pairs on two streams)") { check_schedule<ctpipe::dualpipe_v(2, 4)>(); }
  SUBCASE("1F1B p=3") { check_schedule<ctpipe::one_f_one_b(3, m)>(); }
}

namespace {
using test::recorder;
using recorded =
    ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>, sim_of<recorder<batch, hidden>>,
                  sim_dense<batch, hidden, classes, test::activation::none>>;
}  // namespace

TEST_CASE("cuda executor (simulated): a device layer is told its layer, global microbatch and step, per replay") {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
  constexpr auto stages = ctpipe::stage_bounds<recorded, 0, 2, 4>();  // the recorder: layer 2, stage 1, rank 1
  using exec_t = ctpipe::cuda::basic_executor<table, recorded, stages, sim_loss, ctpipe::cuda::device_per_rank<2>(),
                                              ctpipe::dispatch::automatic, sim::backend>;
  sim::world::get().reset(5, 2);
  auto m = test::device::make_mlp<recorded>();
  sim_loss l;
  const test::data_set d = test::make_data(test::microbatches);
  const test::device::device_data dd(d, 0, 1);
  exec_t exec(m, l);
  CHECK(exec.context_origin().step == 0);
  exec.step(dd.inputs, dd.targets, launch::graph);
  exec.set_context_origin({.step = 40, .first_microbatch = 24});  // say, replica 2 of a data-parallel job
  for (std::uint64_t step : {40u, 41u, 42u}) {
    CAPTURE(step);
    exec.step(dd.inputs, dd.targets, launch::graph);
    test::check_seen(1, 1, 2, 24, step);  // the step read from device memory in the replayed graph
  }
  CHECK(exec.graph_captures() == 2);  // a new first microbatch is part of the graph; a new step is not
  CHECK(exec.context_origin().step == 43);
  CHECK(exec.context_origin().first_microbatch == 24);
}

// The executor keeps each layer's saved state in every stash slot of its stage, in device memory.
namespace {
using norm = sim_of<ctpipe::layers::layer_norm<batch, hidden>>;
using norm_model = ctpipe::model<sim_dense<batch, features, hidden>, norm, sim_dense<batch, hidden, hidden>,
                                 sim_dense<batch, hidden, classes, test::activation::none>>;
using plain_model =
    ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>,
                  sim_dense<batch, hidden, hidden>, sim_dense<batch, hidden, classes, test::activation::none>>;
constexpr auto gpipe2 = ctpipe::make_table<ctpipe::gpipe(2, test::microbatches)>();
template <class M>
using gpipe_exec =
    ctpipe::cuda::basic_executor<gpipe2, M, ctpipe::stage_bounds<M, 0, 2, 4>(), sim_loss,
                                 ctpipe::cuda::device_per_rank<2>(), ctpipe::dispatch::automatic, sim::backend>;
constexpr std::size_t round_up(std::size_t n) { return (n + 255) / 256 * 256; }
// GPipe keeps all 12 microbatches on stage 0: 12 copies of the norm's statistics more than the same
// stage with a dense layer in its place (whose output has the norm's shape).
static_assert(gpipe_exec<norm_model>::device_bytes()[0] ==
              gpipe_exec<plain_model>::device_bytes()[0] + 12 * round_up(norm::saved_type::bytes));
static_assert(gpipe_exec<norm_model>::device_bytes()[1] == gpipe_exec<plain_model>::device_bytes()[1]);
}  // namespace
