// Saved state on the host executor: each microbatch's state is written once by its F and read by
// its B, or by its I and then its W, never overwritten before its last reader (a probe layer stamps
// what it saves with its context and checks the stamp where it reads it), through every schedule
// the executor runs at p = 2..4, with and without recomputation; the context each call gets; the
// bytes activation_bytes() counts for it.
#include "support/numerics.hpp"
#include "support/probe.hpp"

#include <cstdint>

namespace {

using ctpipe::layers::matrix;
using test::counts;
using test::probe;

using test::batch, test::features, test::hidden, test::classes;
using p_in = probe<batch, features>;
using p_mid = probe<batch, hidden>;
using probed = ctpipe::model<p_in, test::dense<batch, features, hidden>, ctpipe::layers::layer_norm<batch, hidden>,
                             p_mid, test::dense<batch, hidden, hidden>, ctpipe::layers::causal_attention<batch, hidden>,
                             p_mid, test::dense<batch, hidden, hidden>, p_mid,
                             test::dense<batch, hidden, classes, test::activation::none>>;
constexpr int probes = 4;

template <auto Table, auto Stages>
void check_liveness() {
  auto m = test::make_mlp<probed>();
  test::loss l;
  const auto d = test::make_data(Table.params.microbatches);
  ctpipe::host_executor<Table, probed, Stages, test::loss, ctpipe::dispatch::table_walk> exec(m, l);
  const int mb = Table.params.microbatches;
  for (int step = 0; step < 2; ++step) {
    counts.reset();
    exec.step(d.inputs, d.targets);
    CHECK(counts.wrong.load() == 0);
    CHECK(counts.writes.load() == probes * mb);
    CHECK(counts.full.load() + counts.input.load() == probes * mb);  // each microbatch: a B, or an I ...
    CHECK(counts.weight.load() == counts.input.load());              // ... and its W
  }
}

template <auto Schedule, bool Recompute = false>
void check_schedule() {
  constexpr auto table = ctpipe::make_table<Schedule>();
  constexpr auto stages = ctpipe::partition<probed, table.stages()>();
  if constexpr (Recompute)
    check_liveness<table, stages.recompute_all()>();
  else
    check_liveness<table, stages>();
}

template <int P>
void every_schedule() {
  constexpr int m = test::microbatches;
  check_schedule<ctpipe::naive(P, m)>();
  check_schedule<ctpipe::gpipe(P, m)>();
  check_schedule<ctpipe::one_f_one_b(P, m)>();
  check_schedule<ctpipe::interleaved(P, m, 2)>();
  check_schedule<ctpipe::zb_h1(P, m)>();
  check_schedule<ctpipe::zb_h2(P, m)>();
  check_schedule<ctpipe::interleaved_zero_bubble(P, m, 2)>();
  check_schedule<ctpipe::zb_v(P, m)>();
  check_schedule<ctpipe::dualpipe_v(P, m)>();
}

}  // namespace

TEST_CASE("saved state: written by F, read by B or by I then W, never overwritten early, p=2") { every_schedule<2>(); }
TEST_CASE("saved state: written by F, read by B or by I then W, never overwritten early, p=3") { every_schedule<3>(); }
TEST_CASE("saved state: written by F, read by B or by I then W, never overwritten early, p=4") { every_schedule<4>(); }

TEST_CASE("saved state: recomputing stages rebuild it, with split backward the I's state reaches its W") {
  check_schedule<ctpipe::one_f_one_b(4, test::microbatches), true>();
  check_schedule<ctpipe::zb_h1(4, test::microbatches), true>();
  check_schedule<ctpipe::zb_v(2, test::microbatches), true>();
  check_schedule<ctpipe::dualpipe_v(2, test::microbatches), true>();
}

namespace {
using test::recorder;
using recorded = ctpipe::model<test::dense<batch, features, hidden>, test::dense<batch, hidden, hidden>,
                               recorder<batch, hidden>, test::dense<batch, hidden, classes, test::activation::none>>;
}  // namespace

TEST_CASE("context: a host layer is told its rank, stage, layer, global microbatch, op and step") {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
  constexpr auto stages = ctpipe::stage_bounds<recorded, 0, 2, 4>();  // the recorder: layer 2, stage 1, rank 1
  auto m = test::make_mlp<recorded>();
  test::loss l;
  const auto d = test::make_data(test::microbatches);
  ctpipe::host_executor<table, recorded, stages, test::loss> exec(m, l);
  CHECK(exec.context_origin().step == 0);
  exec.step(d.inputs, d.targets);
  exec.set_context_origin({.step = 40, .first_microbatch = 24});  // say, replica 2 of a data-parallel job
  exec.step(d.inputs, d.targets);
  CHECK(exec.context_origin().step == 41);
  test::check_seen(1, 1, 2, 24, 40);
}

// activation_bytes counts the saved state in every stash slot (and the recomputed working copy).
namespace {
constexpr auto gpipe2 = ctpipe::make_table<ctpipe::gpipe(2, test::microbatches)>();
using norm = ctpipe::layers::layer_norm<batch, hidden>;
using norm_model = ctpipe::model<test::dense<batch, features, hidden>, norm, test::dense<batch, hidden, hidden>,
                                 test::dense<batch, hidden, classes, test::activation::none>>;
constexpr auto two = ctpipe::stage_bounds<norm_model, 0, 2, 4>();
using norm_exec = ctpipe::host_executor<gpipe2, norm_model, two, test::loss>;
using norm_recompute_exec = ctpipe::host_executor<gpipe2, norm_model, two.recompute_all(), test::loss>;
constexpr std::size_t in_bytes = sizeof(test::input), mid = sizeof(matrix<batch, hidden>);
using stage0_saved = ctpipe::saved_states_t<norm_model, 0, 2>;  // (nothing, the norm's statistics)
static_assert(sizeof(stage0_saved) >= sizeof(norm::saved_type));
// GPipe keeps all 12 microbatches: stage 0 stashes its input, the dense output, the norm output and
// the stage's saved state; recomputing, 12 inputs and one working set with its saved state.
static_assert(norm_exec::activation_bytes()[0] == 12 * (in_bytes + 2 * mid + sizeof(stage0_saved)));
static_assert(norm_recompute_exec::activation_bytes()[0] ==
              12 * in_bytes + (in_bytes + 2 * mid) + sizeof(stage0_saved));
// Stage 1 keeps no state: no bytes for it.
static_assert(norm_exec::activation_bytes()[1] == 12 * (mid + mid + sizeof(matrix<batch, classes>)));
}  // namespace
