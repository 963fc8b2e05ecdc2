// Shared body of the MPI executor's numerics tests: a schedule's pipeline over processes against
// sequential training of the same global batch, in one process.
#pragma once
#include <ctpipe/mpi.hpp>

#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "support/mlp.hpp"
#include "support/numerics.hpp"  // bitwise_equal
#include "support/user_schedule.hpp"

namespace test {

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline bool close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-5f * (1.0f + std::abs(b[i]))) return false;
  return true;
}

// Every process that runs pipeline rank `rank` holds the same bits in `v` (the replicas of a rank).
inline bool same_across_replicas(const std::vector<float>& v, int rank) {
  std::uint64_t h = 14695981039346656037ull;
  for (float x : v) {
    std::uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    h = (h ^ u) * 1099511628211ull;
  }
  const std::uint64_t mine[2] = {static_cast<std::uint64_t>(rank), h};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(world_size()));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::size_t p = 0; p < all.size(); p += 2)
    if (all[p] == mine[0] && all[p + 1] != h) return false;
  return true;
}

// The update of the MPI tests but the sweep's (which trains with the host sweep's AdamW): SGD with momentum,
// clipped as the sweeps are.
inline constexpr ctpipe::sgd_momentum mpi_rule{.lr = 0.002, .momentum = 0.9};

// Trains the MLP with state-saving layers and dropout (unless told) for `steps` steps of ctpipe::optimizer with Rule
// and clipping through the MPI executor for Table (one process per rank per replica, D = world size / ranks; the
// optimizer given the executor, so each process updates its own layers and the norm's terms meet in one all-reduce)
// and, in every process, sequentially (the optimizer over the whole model): the losses of the global batch, the global
// norm, and the gradients and parameters of this process's layers, must be equal to the bit for D <= 2, or with
// options::ordered_sums. Otherwise, for D > 2, MPI's all-reduce may add the replicas' sums in another order than the
// reference: then they must agree to rounding, and the replicas of a rank with each other to the bit. A model with
// extents (the sweeps' test::block_mlp) gets microbatches of mixed lengths, new ones every step; the global batch's
// tokens come back on every process, and this process's messages carry only the used tokens. Then
// evaluate() and predict() on the trained parameters.
template <auto Table, auto Plan, ctpipe::dispatch Dispatch = ctpipe::dispatch::automatic, class Model = stateful_mlp,
          class Rule = ctpipe::sgd_momentum>
void train_against_sequential_mpi(int steps = 6, bool synchronous = false, bool ordered = false, Rule rule = mpi_rule,
                                  ctpipe::clipping clip = sweep_clip) {
  using Loss = loss_for<Model>;
  using Input = typename Model::input_type;
  constexpr bool with_extents = Model::token_capacity > 0;
  using exec_t = ctpipe::mpi::executor<Table, Model, Plan, Loss, Dispatch>;
  constexpr int m = Table.params.microbatches;
  Model seq = make_mlp<Model>(), pipe = make_mlp<Model>();
  Loss l;
  exec_t exec(pipe, l, MPI_COMM_WORLD,
              {.timeout = std::chrono::seconds(60), .synchronous_sends = synchronous, .ordered_sums = ordered});
  const int d = exec.replicas();
  REQUIRE(d * exec_t::ranks == world_size());
  const auto data = make_data<Input>(d * m);
  const auto first = static_cast<std::size_t>(exec.replica() * m);
  const auto inputs = std::span<const Input>(data.inputs).subspan(first, m);
  const auto targets = std::span<const target>(data.targets).subspan(first, m);
  const bool bitwise = d <= 2 || ordered;
  ctpipe::optimizer seq_opt(seq, rule, clip), pipe_opt(pipe, exec, rule, clip);
  int clipped = 0;
  for (int step = 0; step < steps; ++step) {
    const std::vector<int> e =
        with_extents ? extents(d * m, static_cast<std::uint64_t>(step)) : std::vector<int>{};  // the global batch's
    const std::vector<double> ref =
        reference_step(seq, l, data, d, m, static_cast<std::uint64_t>(step), e, ctpipe::directions_of(Table));
    const ctpipe::token_losses got =
        exec.step(inputs, targets, with_extents ? std::span<const int>(e).subspan(first, m) : std::span<const int>{});
    REQUIRE(got.losses.size() == ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
      if (bitwise)
        REQUIRE(got.losses[i] == ref[i]);
      else
        REQUIRE(got.losses[i] == doctest::Approx(ref[i]).epsilon(1e-5));
    if constexpr (with_extents) {
      REQUIRE(got.tokens.size() == e.size());
      for (std::size_t i = 0; i < e.size(); ++i) REQUIRE(got.tokens[i] == e[i]);
    }
    const auto want = rank_values<Plan, exec_t::table>(seq, exec.rank(), true);
    const auto have = rank_values<Plan, exec_t::table>(pipe, exec.rank(), true);
    REQUIRE((bitwise ? bitwise_equal(want, have) : close(want, have)));
    REQUIRE(same_across_replicas(have, exec.rank()));
    const ctpipe::update_result a = seq_opt.step(), b = pipe_opt.step();
    if (bitwise) {
      same_update(a, b, clipped);
    } else {
      REQUIRE(a.applied == b.applied);
      REQUIRE(b.norm == doctest::Approx(a.norm).epsilon(1e-5));
    }
  }
  const auto want = rank_values<Plan, exec_t::table>(seq, exec.rank(), false);
  const auto have = rank_values<Plan, exec_t::table>(pipe, exec.rank(), false);
  CHECK((bitwise ? bitwise_equal(want, have) : close(want, have)));
  CHECK(same_across_replicas(have, exec.rank()));
  // Forward only, on the trained parameters: the global batch's losses on every process, and this
  // replica's outputs on each of its processes, as the sequential forward gives them; no gradient
  // touched, no training step counted.
  using Output = typename Model::output_type;
  const auto s = static_cast<std::uint64_t>(steps);
  const std::vector<int> e = with_extents ? extents(d * m, s) : std::vector<int>{};
  const auto own_e = with_extents ? std::span<const int>(e).subspan(first, m) : std::span<const int>{};
  const auto grads = rank_values<Plan, exec_t::table>(pipe, exec.rank(), true);
  std::vector<double> ref(data.inputs.size());
  ctpipe::sequential_evaluate(seq, l, std::span<const Input>(data.inputs), std::span<const target>(data.targets),
                              std::span<const int>(e), std::span<double>(ref), {s, 0});
  const ctpipe::token_losses got = exec.evaluate(inputs, targets, own_e);
  REQUIRE(got.losses.size() == ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (bitwise)
      REQUIRE(got.losses[i] == ref[i]);
    else
      REQUIRE(got.losses[i] == doctest::Approx(ref[i]).epsilon(1e-5));
  if constexpr (with_extents)
    for (std::size_t i = 0; i < e.size(); ++i) REQUIRE(got.tokens[i] == e[i]);
  std::vector<Output> want_out(m), got_out(m);
  ctpipe::sequential_predict(seq, inputs, own_e, std::span<Output>(want_out), {s, static_cast<int>(first)});
  exec.predict(inputs, got_out, own_e);
  if (bitwise)
    for (std::size_t i = 0; i < want_out.size(); ++i)
      REQUIRE(std::memcmp(&want_out[i], &got_out[i], sizeof(Output)) == 0);
  REQUIRE(bitwise_equal(grads, rank_values<Plan, exec_t::table>(pipe, exec.rank(), true)));
  REQUIRE(exec.context_origin().step == s);
}

// The model of the host sweeps (test::block_mlp: the stateful MLP with two residuals and a head
// tied to its first layer, over microbatches of mixed lengths) in stages of equal layer counts, its
// residuals' skip messages and its tied head's sums between processes, 20 steps.
template <auto Schedule, ctpipe::dispatch Dispatch = ctpipe::dispatch::automatic>
void check_schedule_mpi() {
  constexpr auto stages = even_stages<block_mlp, Schedule.info().stages()>();
  constexpr auto table = table_for<Schedule, block_mlp, stages>();
  train_against_sequential_mpi<table, stages, Dispatch, block_mlp>(20, false, false, sweep_rule);
}

}  // namespace test

// Every schedule at P = N (the suite "npN" runs under mpirun -np N): one process per rank, each
// rank's program dispatched by D (unrolled, or table_walk: the same results, much less to compile).
#define CTPIPE_MPI_SCHEDULES(N, D)                                                                                \
  TEST_SUITE("np" #N) {                                                                                           \
    TEST_CASE("mpi executor: naive p=" #N) {                                                                      \
      test::check_schedule_mpi<ctpipe::naive(N, test::microbatches), ctpipe::dispatch::D>();                      \
    }                                                                                                             \
    TEST_CASE("mpi executor: gpipe p=" #N) {                                                                      \
      test::check_schedule_mpi<ctpipe::gpipe(N, test::microbatches), ctpipe::dispatch::D>();                      \
    }                                                                                                             \
    TEST_CASE("mpi executor: one_f_one_b p=" #N) {                                                                \
      test::check_schedule_mpi<ctpipe::one_f_one_b(N, test::microbatches), ctpipe::dispatch::D>();                \
    }                                                                                                             \
    TEST_CASE("mpi executor: interleaved p=" #N) {                                                                \
      test::check_schedule_mpi<ctpipe::interleaved(N, test::microbatches, 2), ctpipe::dispatch::D>();             \
    }                                                                                                             \
    TEST_CASE("mpi executor: zb_h1 p=" #N) {                                                                      \
      test::check_schedule_mpi<ctpipe::zb_h1(N, test::microbatches), ctpipe::dispatch::D>();                      \
    }                                                                                                             \
    TEST_CASE("mpi executor: zb_h2 p=" #N) {                                                                      \
      test::check_schedule_mpi<ctpipe::zb_h2(N, test::microbatches), ctpipe::dispatch::D>();                      \
    }                                                                                                             \
    TEST_CASE("mpi executor: interleaved_zero_bubble p=" #N) {                                                    \
      test::check_schedule_mpi<ctpipe::interleaved_zero_bubble(N, test::microbatches, 2), ctpipe::dispatch::D>(); \
    }                                                                                                             \
    TEST_CASE("mpi executor: zb_v p=" #N) {                                                                       \
      test::check_schedule_mpi<ctpipe::zb_v(N, test::microbatches), ctpipe::dispatch::D>();                       \
    }                                                                                                             \
    TEST_CASE("mpi executor: dualpipe_v p=" #N) {                                                                 \
      test::check_schedule_mpi<ctpipe::dualpipe_v(N, test::microbatches), ctpipe::dispatch::D>();                 \
    }                                                                                                             \
    TEST_CASE("mpi executor: a user's schedule p=" #N) {                                                          \
      test::check_schedule_mpi<user::eager_one_f_one_b{N, test::microbatches}, ctpipe::dispatch::D>();            \
    }                                                                                                             \
  }
