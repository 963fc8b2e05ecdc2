// Data parallelism (D = 2 x P = 2 on four processes), the two FIFOs of a rank pair (interleaved
// with microbatch groups larger than the pipeline), sends that wait for their receive, and the
// optimizer across processes (a NaN in one process skips the step on all).
#include "mpi_numerics.hpp"
#include "support/recording.hpp"

#include <limits>

namespace {
// 1F1B on two ranks (D = 2 on four processes), and this replica's half of a global batch.
constexpr auto table_p2 = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
constexpr auto stages_p2 = ctpipe::partition<test::mlp, 2>();
using exec_p2 = ctpipe::mpi::executor<table_p2, test::mlp, stages_p2, test::loss>;
struct replica_batch {
  const decltype(test::make_data(1)) data = test::make_data(2 * test::microbatches);
  std::span<const test::input> inputs;
  std::span<const test::target> targets;
  explicit replica_batch(int replica)
      : inputs(std::span<const test::input>(data.inputs)
                   .subspan(static_cast<std::size_t>(replica * test::microbatches), test::microbatches)),
        targets(std::span<const test::target>(data.targets)
                    .subspan(static_cast<std::size_t>(replica * test::microbatches), test::microbatches)) {}
  replica_batch(const replica_batch&) = delete;
  replica_batch& operator=(const replica_batch&) = delete;
};
}  // namespace

TEST_SUITE("np4") {
  TEST_CASE("mpi executor: D=2 x P=2, one_f_one_b, bitwise equal to the sum of two sequential replicas") {
    test::check_schedule_mpi<ctpipe::one_f_one_b(2, test::microbatches)>();
  }
  TEST_CASE("mpi executor: D=2 x P=2, one_f_one_b, a model with a layer without parameters, bitwise") {
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
    test::train_against_sequential_mpi<table, ctpipe::partition<test::relu_mlp, 2>(), ctpipe::dispatch::automatic,
                                       test::relu_mlp>();
    test::train_against_sequential_mpi<table, ctpipe::partition<test::relu_mlp, 2>(), ctpipe::dispatch::automatic,
                                       test::relu_mlp>(6, false, true);  // ordered sums
  }
  TEST_CASE("mpi executor: D=2 x P=2, interleaved, bitwise") {
    test::check_schedule_mpi<ctpipe::interleaved(2, test::microbatches, 2)>();
  }
  TEST_CASE("mpi executor: D=2 x P=2, zb_v (split backward: sums start after each stage's last W), bitwise") {
    test::check_schedule_mpi<ctpipe::zb_v(2, test::microbatches)>();
  }
  // (D = 4 trains the dense MLP: four replicas' summed gradients take the attention of the
  // state-saving one past what SGD at this rate survives.)
  TEST_CASE("mpi executor: D=4 x P=1, gpipe: one process per replica, equal to rounding, replicas bitwise alike") {
    constexpr auto gpipe = ctpipe::make_table<ctpipe::gpipe(1, test::microbatches)>();
    test::train_against_sequential_mpi<gpipe, ctpipe::partition<test::mlp, 1>(), ctpipe::dispatch::automatic,
                                       test::mlp>();
  }
  TEST_CASE("mpi executor: D=4 x P=1 and D=2 x P=2 with ordered sums: bitwise equal to sequential training") {
    constexpr auto gpipe = ctpipe::make_table<ctpipe::gpipe(1, test::microbatches)>();
    test::train_against_sequential_mpi<gpipe, ctpipe::partition<test::mlp, 1>(), ctpipe::dispatch::automatic,
                                       test::mlp>(6, false, true);
    constexpr auto zbv = ctpipe::make_table<ctpipe::zb_v(2, test::microbatches)>();
    test::train_against_sequential_mpi<zbv, ctpipe::partition<test::mlp, 4>()>(6, false, true);
  }
  TEST_CASE("mpi executor: processes that disagree on ordered sums are refused") {
    constexpr auto table = ctpipe::make_table<ctpipe::gpipe(1, test::microbatches)>();
    test::mlp m = test::make_mlp();
    test::loss l;
    int process = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    using exec_t = ctpipe::mpi::executor<table, test::mlp, ctpipe::partition<test::mlp, 1>(), test::loss>;
    CHECK_THROWS_WITH_AS(exec_t(m, l, MPI_COMM_WORLD, {.ordered_sums = process == 3}),
                         doctest::Contains("process(es) 3 run another table"), ctpipe::mpi::launch_error);
  }
  TEST_CASE("mpi executor: a group of three shared layers on three processes (1F1B, P=4), bitwise") {
    constexpr auto stages = test::even_stages<test::group_mlp, 4>();
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, test::microbatches)>();
    test::train_against_sequential_mpi<table, stages, ctpipe::dispatch::table_walk, test::group_mlp>(20);
  }
  TEST_CASE("mpi executor: dualpipe P=4, bitwise equal to the two halves' sequential training") {
    constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(4, test::microbatches)>();
    test::train_against_sequential_mpi<table, test::even_stages<test::stateful_mlp, 4>(), ctpipe::dispatch::table_walk>(
        20);
  }
  TEST_CASE("mpi executor: D=2 x P=2, dualpipe, bitwise") {
    constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, test::microbatches)>();
    test::train_against_sequential_mpi<table, test::even_stages<test::token_mlp, 2>(), ctpipe::dispatch::table_walk,
                                       test::token_mlp>(20);
  }
  TEST_CASE("mpi executor: the grid puts a rank's replicas side by side") {
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
    constexpr auto stages = ctpipe::partition<test::mlp, 2>();
    test::mlp m = test::make_mlp();
    test::loss l;
    ctpipe::mpi::executor<table, test::mlp, stages, test::loss> exec(m, l);
    int process = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    CHECK(exec.replicas() == 2);
    CHECK(exec.rank() == process / 2);
    CHECK(exec.replica() == process % 2);
    static_assert(ctpipe::mpi::place_of(3, 2, 2) == ctpipe::mpi::place{3, 4, 1, 2, 1, 2});
    static_assert(ctpipe::mpi::process_of(1, 0, 2) == 2);
  }
  // The optimizer's places: each process updates its rank's layers; each layer counts once in the
  // norm (replica 0's holder). A NaN in any process's gradient, counted or not, skips the step on
  // every process: parameters, state and update counts untouched; the next finite step applies.
  TEST_CASE("mpi executor: a NaN in one process's gradient skips the optimizer's step on every process") {
    constexpr auto table = table_p2;
    constexpr auto stages = stages_p2;
    test::mlp m = test::make_mlp();
    test::loss l;
    exec_p2 exec(m, l, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    ctpipe::optimizer opt(m, exec, ctpipe::adamw{.lr = 0.003}, {.max_norm = 1.0});
    constexpr std::size_t last = test::mlp::size - 1;  // on rank 1
    CHECK(exec.updates_layer(last) == (exec.rank() == 1));
    CHECK(exec.counts_layer(last) == (exec.rank() == 1 && exec.replica() == 0));
    CHECK(opt.holds(0) == (exec.rank() == 0));
    const replica_batch b(exec.replica());
    const auto inputs = b.inputs;
    const auto targets = b.targets;
    exec.step(inputs, targets);
    REQUIRE(opt.step().applied);
    for (const int where : {3, 0}) {  // rank 1 of replica 1 (not counted: its replica 0 is), then rank 0 of replica 0
      CAPTURE(where);
      const std::vector<float> before = test::rank_values<stages, table>(m, exec.rank(), false);
      exec.step(inputs, targets);
      int process = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &process);
      if (process == where) {
        if (exec.rank() == 1)
          m.layer<last>().grads[5] = std::numeric_limits<float>::quiet_NaN();
        else
          m.layer<0>().grads[0] = std::numeric_limits<float>::infinity();
      }
      const ctpipe::update_result r = opt.step();
      CHECK_FALSE(r.applied);
      CHECK_FALSE(std::isfinite(r.norm));
      CHECK(opt.updates() == 1);
      CHECK(test::bitwise_equal(before, test::rank_values<stages, table>(m, exec.rank(), false)));
    }
    exec.step(inputs, targets);
    const ctpipe::update_result r = opt.step();
    CHECK(r.applied);
    CHECK(opt.updates() == 2);
    CHECK(opt.layer_updates(exec.rank() == 0 ? 0 : last) == 2);
  }
}

// What really ran, on every process: each records its rank's tasks, process 0 measures the
// others' clocks against its own and gathers one measured step per replica; the numerics are
// those of a step that does not record.
TEST_SUITE("np4") {
  TEST_CASE("mpi executor: D=2 x P=2, record_steps: every process's tasks on process 0's clock") {
    constexpr auto table = table_p2;
    constexpr auto stages = stages_p2;
    using exec_t = exec_p2;
    test::mlp m = test::make_mlp();
    test::loss l;
    exec_t exec(m, l, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    const replica_batch b(exec.replica());
    const auto inputs = b.inputs;
    const auto targets = b.targets;
    const auto plain = exec.step(inputs, targets);
    const std::vector<double> plain_losses(plain.begin(), plain.end());
    const std::vector<float> plain_values = test::rank_values<stages, table>(m, exec.rank(), true);
    CHECK(exec.recorded_step().ranks.empty());  // off by default
    exec.record_steps(true);
    const auto recorded = exec.step(inputs, targets);
    CHECK(std::equal(plain_losses.begin(), plain_losses.end(), recorded.begin(), recorded.end()));
    CHECK(test::bitwise_equal(plain_values, test::rank_values<stages, table>(m, exec.rank(), true)));
    int process = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    if (process == 0) {
      const double error = exec.recorded_alignment_error();
      CHECK(error >= 0.0);
      for (int d = 0; d < 2; ++d) {
        CAPTURE(d);
        test::check_record(exec_t::table, exec.recorded_step(d), error);
        const auto c = ctpipe::compare_measured(exec_t::table, exec.recorded_step(d));
        CHECK(c.measured > 0.0);
      }
      CHECK(exec.recorded_step(2).ranks.empty());
    } else {
      CHECK(exec.recorded_step().ranks.empty());
      CHECK(exec.recorded_alignment_error() == 0.0);
    }
    // Off again: the last recording stays, the steps that follow record nothing.
    const ctpipe::measured_step last = exec.recorded_step(1);
    exec.record_steps(false);
    exec.step(inputs, targets);
    CHECK(exec.recorded_step(1).ranks == last.ranks);
  }
}

TEST_SUITE("np2") {
  TEST_CASE(
      "mpi executor: interleaved with groups of 4 microbatches on 2 ranks: activations and gradients "
      "cross one rank pair as two FIFOs") {
    test::check_schedule_mpi<ctpipe::interleaved(2, test::microbatches, 2, 4)>();
  }
  TEST_CASE("mpi executor: synchronous sends (MPI_Issend): nothing relies on MPI buffering a message") {
    constexpr auto one = ctpipe::make_table<ctpipe::one_f_one_b(2, test::microbatches)>();
    test::train_against_sequential_mpi<one, ctpipe::partition<test::mlp, 2>()>(3, true);
    constexpr auto inter = ctpipe::make_table<ctpipe::interleaved(2, test::microbatches, 2, 4)>();
    test::train_against_sequential_mpi<inter, ctpipe::partition<test::mlp, 4>()>(3, true);
    constexpr auto zbv = ctpipe::make_table<ctpipe::zb_v(2, test::microbatches)>();
    test::train_against_sequential_mpi<zbv, ctpipe::partition<test::mlp, 4>()>(3, true);
  }
  TEST_CASE("mpi executor: two members of a shared group in one process and one in another, bitwise") {
    constexpr auto stages = test::even_stages<test::group_mlp, 4>();
    constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, test::microbatches, 2)>();
    test::train_against_sequential_mpi<table, stages, ctpipe::dispatch::table_walk, test::group_mlp>(20);
  }
  TEST_CASE("mpi executor: parameters shared by hand between ranks are refused at construction, on every process") {
    using test::hh;
    using net = ctpipe::model<ctpipe::layers::dense<test::batch, test::features, test::hidden>, hh, test::borrowed,
                              ctpipe::layers::dense<test::batch, test::hidden, test::classes>>;
    net m = test::make_mlp<net>();
    m.layer<2>().w = m.layer<1>().parameters();
    m.layer<2>().g = m.layer<1>().gradients();
    test::loss l;
    constexpr auto stages = ctpipe::stage_bounds<net, 0, 2, 4>();
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
    using exec_t = ctpipe::mpi::executor<table, net, stages, test::loss>;
    CHECK_THROWS_WITH_AS(exec_t(m, l), doctest::Contains("layers 1 and 2 (on ranks 0 and 1) hold overlapping"),
                         std::invalid_argument);
  }
  TEST_CASE("mpi executor: dualpipe P=2, bitwise equal to the two halves' sequential training") {
    constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(2, test::microbatches)>();
    test::train_against_sequential_mpi<table, test::even_stages<test::stateful_mlp, 2>()>(20);
    test::train_against_sequential_mpi<table, test::even_stages<test::token_mlp, 2>(), ctpipe::dispatch::table_walk,
                                       test::token_mlp>(20, true);  // synchronous sends
  }
  // (The sweeps' model, a graph with extents and a tied head, runs every schedule at np 2, 3 and 4.)
  TEST_CASE("mpi executor: a chain with extents, ZB-H1, bitwise, each message packing the used tokens") {
    constexpr auto zb = ctpipe::make_table<ctpipe::zb_h1(2, test::microbatches)>();
    test::train_against_sequential_mpi<zb, ctpipe::partition<test::token_mlp, 2>(), ctpipe::dispatch::automatic,
                                       test::token_mlp>();
    // The sweeps' model in halves: 4 rows of 32 floats cross each way per token (tests/exec/extents.cpp).
    constexpr auto halves = test::even_stages<test::block_mlp, 2>();
    constexpr auto table = test::table_for<ctpipe::one_f_one_b(2, 6), test::block_mlp, halves>();
    auto model = test::make_mlp<test::block_mlp>();
    test::loss_for<test::block_mlp> l;
    const auto d = test::make_data<test::block_mlp::input_type>(6);
    ctpipe::mpi::executor<table, test::block_mlp, halves, test::loss_for<test::block_mlp>> exec(model, l);
    const std::vector<int> e{1, 4, 2, 3, 4, 1};
    const ctpipe::token_losses got = exec.step(d.inputs, d.targets, e);
    CHECK(got.total_tokens() == 15);
    unsigned long sent = exec.sent_bytes(), total = 0;
    MPI_Allreduce(&sent, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == 4 * test::hidden * sizeof(float) * 15);
  }
}
