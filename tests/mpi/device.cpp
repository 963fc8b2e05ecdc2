// The MPI executor's device path (device layers, tensors staged through pinned host memory) on the
// stream simulator, one simulated GPU per MPI process, each step ending with the device optimizer's
// update of the process's layers: bitwise against sequential training, under
// random interleavings of each process's streams; sends that wait for their receive; D = 2 x P = 2;
// DualPipe (each stage's two copies on a pair of processes); a throwing layer. After each run,
// evaluate() and predict() on the trained parameters, bitwise the sequential forward pass.
#include "mpi_numerics.hpp"

#include <optional>
#include <stdexcept>

#include <ctpipe/mpi/device_executor.hpp>

#include "support/recording.hpp"
#include "support/sim_numerics.hpp"  // sim_mlp

namespace {

template <auto Table, class Model = test::device::token_block_mlp, ctpipe::dispatch D = ctpipe::dispatch::automatic,
          auto Stages = ctpipe::partition<Model, Table.stages()>()>
using device_exec =
    ctpipe::mpi::basic_device_executor<Table, Model, Stages, test::device::sim_loss_for<Model>, sim::backend, D>;
// Most runs walk the table (the same task code, less to compile); 1F1B and DualPipeV unroll.
constexpr auto walk = ctpipe::dispatch::table_walk;
constexpr auto auto_d = ctpipe::dispatch::automatic;
constexpr auto record_1f1b = ctpipe::one_f_one_b(2, test::microbatches);

// `steps` steps of Table against the reference (D = processes / ranks replicas). A graph model (the
// block MLP over tokens, by default: mixed extents, different every step) is split into stages of
// equal layer counts, its table built with its crossings (sim_numerics.hpp): at P = 2 ZB-V sends a
// skip message between the processes.
// Record: the last step is recorded (record_steps) and checked on process 0 (every task of every
// process once, in order, each receive after its send within the stated error).
template <auto Schedule, class Model = test::device::token_block_mlp, ctpipe::dispatch D = ctpipe::dispatch::automatic,
          bool Record = false>
void train(bool synchronous = false, int steps = 3) {
  constexpr auto table = test::device::sweep_table<Schedule, Model>();
  using exec_t = device_exec<table, Model, D, test::device::sweep_stages<Schedule, Model>()>;
  constexpr int m = table.microbatches();
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  sim::world::get().reset(static_cast<unsigned>(11 + process), 1);
  using host_t = test::device::host_model_t<Model>;
  using host_input = typename host_t::input_type;
  constexpr bool tokens = Model::token_capacity > 0;
  host_t seq = test::make_mlp<host_t>();
  test::loss_for<host_t> l;
  {
    Model pipe = test::device::make_mlp<Model>();
    test::device::sim_loss_for<Model> dl;
    exec_t exec(pipe, dl, 0, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60), .synchronous_sends = synchronous});
    const int d = exec.replicas();
    const auto all = test::make_data<host_input>(d * m);
    test::basic_data_set<host_input> mine;
    mine.inputs.assign(all.inputs.begin() + exec.replica() * m, all.inputs.begin() + (exec.replica() + 1) * m);
    mine.targets.assign(all.targets.begin() + exec.replica() * m, all.targets.begin() + (exec.replica() + 1) * m);
    const test::device::basic_device_data<typename Model::input_type> dd(mine);
    // The sweep's update (clipped AdamW) on this process's device, at the end of each step; the
    // norm's terms meet in the step's agreement (one all-reduce of every process).
    ctpipe::optimizer ref(seq, test::sweep_rule, test::sweep_clip);
    ctpipe::cuda::device_optimizer opt(exec, test::sweep_rule, test::sweep_clip);
    int clipped = 0;
    for (int step = 0; step < steps; ++step) {
      const std::vector<int> e = tokens ? test::extents(d * m, static_cast<std::uint64_t>(step)) : std::vector<int>{};
      const std::vector<double> want =
          test::reference_step(seq, l, all, d, m, static_cast<std::uint64_t>(step), e, ctpipe::directions_of(table));
      const bool recorded = Record && step == steps - 1;
      if constexpr (Record) exec.record_steps(recorded);
      std::span<const double> got;
      if constexpr (tokens) {
        const ctpipe::token_losses r = exec.step(
            dd.inputs, dd.targets,
            std::span<const int>(e).subspan(static_cast<std::size_t>(exec.replica() * m), static_cast<std::size_t>(m)));
        REQUIRE(std::ranges::equal(r.tokens, e));
        got = r.losses;
      } else {
        got = exec.step(dd.inputs, dd.targets);
      }
      REQUIRE(std::vector<double>(got.begin(), got.end()) == want);
      if constexpr (Record) {
        CHECK(exec.recorded_step(0).ranks.empty() == (!recorded || process != 0));
        if (recorded && process == 0)
          for (int r = 0; r < d; ++r)
            test::check_record(exec_t::plan.table, exec.recorded_step(r), exec.recorded_alignment_error());
      }
      test::same_update(ref.step(), opt.result(), clipped);
      // (the gradients as each update left them: clipped where it clipped)
      REQUIRE(test::bitwise_equal(test::rank_values<exec_t::stages, exec_t::plan.table>(seq, exec.rank(), true),
                                  test::rank_values<exec_t::stages, exec_t::plan.table>(pipe, exec.rank(), true)));
    }
    CHECK(clipped > 0);
    REQUIRE(test::device::same_state(ref, opt, [&](std::size_t k) { return exec.updates_layer(k); }));
    CHECK(test::bitwise_equal(test::rank_values<exec_t::stages, exec_t::plan.table>(seq, exec.rank(), false),
                              test::rank_values<exec_t::stages, exec_t::plan.table>(pipe, exec.rank(), false)));
    // Forward only, on the trained parameters: the global batch's losses on every process, and this
    // replica's outputs on each of its processes' devices, to the bit; no gradient touched, no step.
    const auto s = static_cast<std::uint64_t>(steps);
    const std::size_t first = static_cast<std::size_t>(exec.replica() * m);
    const std::vector<int> e = tokens ? test::extents(d * m, s) : std::vector<int>{};
    const auto own_e = tokens ? std::span<const int>(e).subspan(first, m) : std::span<const int>{};
    const auto grads = test::rank_values<exec_t::stages, exec_t::plan.table>(pipe, exec.rank(), true);
    std::vector<double> want(all.inputs.size());
    ctpipe::sequential_evaluate(seq, l, std::span<const host_input>(all.inputs),
                                std::span<const test::target>(all.targets), std::span<const int>(e),
                                std::span<double>(want), {s, 0});
    const ctpipe::token_losses got = exec.evaluate(dd.inputs, dd.targets, own_e);
    REQUIRE(std::vector<double>(got.losses.begin(), got.losses.end()) == want);
    if constexpr (tokens) REQUIRE(std::ranges::equal(got.tokens, e));
    using host_output = typename host_t::output_type;
    using output = typename exec_t::output_type;
    std::vector<host_output> want_out(m);
    ctpipe::sequential_predict(seq, std::span<const host_input>(mine.inputs), own_e, std::span<host_output>(want_out),
                               {s, static_cast<int>(first)});
    {
      const sim::buffer out(m * output::bytes, 0);
      std::memset(out.p, 0x7f, m * output::bytes);  // (not zeros: every process must get every output)
      std::vector<output> outs;
      for (int i = 0; i < m; ++i) outs.push_back({out.as<float>() + static_cast<std::size_t>(i) * output::size});
      exec.predict(dd.inputs, outs, own_e);
      for (int i = 0; i < m; ++i)
        REQUIRE(std::memcmp(want_out[static_cast<std::size_t>(i)].v.data(), outs[static_cast<std::size_t>(i)].data,
                            output::bytes) == 0);
    }
    REQUIRE(test::bitwise_equal(grads, test::rank_values<exec_t::stages, exec_t::plan.table>(pipe, exec.rank(), true)));
    REQUIRE(exec.context_origin().step == s);
  }
  CHECK(sim::world::get().wrong_device_work.empty());
  CHECK(sim::world::get().live_allocations == 0);
}

int fail_microbatch = -1;
struct throwing_dense : test::device::sim_dense<test::batch, test::hidden, test::hidden> {
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    if (c.microbatch == fail_microbatch) throw std::runtime_error("injected fault");
    sim_dense::forward(c, x, y);
  }
};
using test::device::sim_dense;
using faulty_mlp = ctpipe::model<
    sim_dense<test::batch, test::features, test::hidden>, sim_dense<test::batch, test::hidden, test::hidden>,
    sim_dense<test::batch, test::hidden, test::hidden>, sim_dense<test::batch, test::hidden, test::hidden>,
    throwing_dense, sim_dense<test::batch, test::hidden, test::hidden>,
    sim_dense<test::batch, test::hidden, test::hidden>,
    sim_dense<test::batch, test::hidden, test::classes, ctpipe::layers::activation::none>>;

}  // namespace

TEST_SUITE("np2") {
  TEST_CASE("mpi device executor (simulated GPUs): every schedule at P=2, bitwise") {
    SUBCASE("1F1B, its last step recorded") { train<record_1f1b, test::device::token_block_mlp, auto_d, true>(); }
    SUBCASE("GPipe (rows of fixed size)") {
      train<ctpipe::gpipe(2, test::microbatches), test::device::block_mlp, walk>();
    }
    SUBCASE("interleaved, groups of 4 (two FIFOs cross)") {
      train<ctpipe::interleaved(2, 8, 2, 4), test::device::token_block_mlp, walk>();
    }
    SUBCASE("ZB-H1") { train<ctpipe::zb_h1(2, test::microbatches), test::device::split_token_block_mlp, walk>(); }
    SUBCASE("ZB-V (a skip message from rank 1 to rank 0)") {
      constexpr auto table = test::device::sweep_table<ctpipe::zb_v(2, test::microbatches), test::device::block_mlp>();
      static_assert(table.crossings.size() == 1 && table.stage_rank[table.crossings[0].from] == 1 &&
                    table.stage_rank[table.crossings[0].to] == 0);
      train<ctpipe::zb_v(2, test::microbatches), test::device::split_token_block_mlp, walk>();
    }
    SUBCASE("DualPipeV (pairs on two streams)") {
      train<ctpipe::dualpipe_v(2, 4), test::device::split_token_block_mlp>();
    }
    SUBCASE("DualPipe (each stage's two copies summed by the two processes)") {
      train<ctpipe::dualpipe(2, 4), test::device::split_stateful_mlp>();
    }
  }
  TEST_CASE("mpi device executor (simulated GPUs): sends that wait for their receive") {
    train<ctpipe::interleaved(2, 8, 2, 4), test::device::token_block_mlp, walk>(true);
    train<ctpipe::zb_v(2, test::microbatches), test::device::split_token_block_mlp, walk>(true);
  }
  TEST_CASE(
      "mpi device executor (simulated GPUs): extents: messages at their used rows, and processes that disagree fail the step") {
    using chain = test::device::token_mlp;
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
    using exec_t = device_exec<table, chain>;
    int process = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &process);
    sim::world::get().reset(5, 1);
    chain pipe = test::device::make_mlp<chain>();
    test::device::sim_token_loss dl;
    exec_t exec(pipe, dl, 0, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    const auto d = test::make_data<test::token_mlp::input_type>(4);
    const test::device::basic_device_data<chain::input_type> dd(d);
    const std::vector<int> e{1, 4, 2, 3};
    const ctpipe::token_losses r = exec.step(dd.inputs, dd.targets, e);
    CHECK(r.total_tokens() == 10);
    // Process 1 gives microbatch 1 another extent: what it receives is not what it expects, and
    // the step ends on both (task_failure on the one whose receive saw it, peer_failure on the other).
    const std::vector<int> other{1, process == 1 ? 3 : 4, 2, 3};
    try {
      (void)exec.step(dd.inputs, dd.targets, other);
      FAIL("the step should have failed");
    } catch (const ctpipe::task_failure& f) {
      CHECK(f.microbatch() == 1);
      if (dynamic_cast<const ctpipe::peer_failure*>(&f) == nullptr)
        CHECK(std::string(f.what()).find("every process must give step() the same extents") != std::string::npos);
    }
    const ctpipe::token_losses again = exec.step(dd.inputs, dd.targets, e);
    CHECK(std::ranges::equal(again.tokens, e));
  }
  // With the device optimizer: the failed step updates nothing on either process; and where only
  // one process has an optimizer attached, both are told at the step's end and neither updates.
  TEST_CASE(
      "mpi device executor (simulated GPUs): a throwing layer ends the step on both, the next is right, the device "
      "optimizer skips the failed step, and processes that do not both attach one are refused") {
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
    using exec_t = device_exec<table, faulty_mlp>;
    sim::world::get().reset(3, 1);
    faulty_mlp pipe = test::device::make_mlp<faulty_mlp>();
    test::device::sim_loss dl;
    exec_t exec(pipe, dl, 0, MPI_COMM_WORLD, {.timeout = std::chrono::seconds(60)});
    std::optional<ctpipe::cuda::device_optimizer<exec_t, ctpipe::adamw>> opt;
    opt.emplace(exec, test::sweep_rule, test::sweep_clip);
    const auto parameters = [&] {
      return test::rank_values<exec_t::stages, exec_t::plan.table>(pipe, exec.rank(), false);
    };
    const std::vector<float> before = parameters();
    const test::data_set d = test::make_data(4);
    const test::device::device_data dd(d);
    fail_microbatch = 2;
    try {
      exec.step(dd.inputs, dd.targets);
      FAIL("the step should have failed");
    } catch (const ctpipe::task_failure& e) {
      CHECK(e.rank() == 1);
      CHECK(e.stage() == 1);
      CHECK(e.microbatch() == 2);
      CHECK(e.op() == ctpipe::op_kind::forward);
      CHECK(std::string(e.what()).find("injected fault") != std::string::npos);
      CHECK((dynamic_cast<const ctpipe::peer_failure*>(&e) != nullptr) == (exec.rank() == 0));
    }
    fail_microbatch = -1;
    CHECK_FALSE(opt->result().applied);
    CHECK(opt->updates() == 0);
    CHECK(test::bitwise_equal(before, parameters()));
    test::mlp seq = test::make_mlp();
    test::loss l;
    ctpipe::optimizer ref(seq, test::sweep_rule, test::sweep_clip);
    const std::vector<double> want = test::reference_step(seq, l, d, 1, 4);
    const auto got = exec.step(dd.inputs, dd.targets);
    CHECK(std::vector<double>(got.begin(), got.end()) == want);
    int clipped = 0;
    test::same_update(ref.step(), opt->result(), clipped);
    CHECK(test::bitwise_equal(test::rank_values<exec_t::stages, exec_t::plan.table>(seq, exec.rank(), false),
                              parameters()));
    if (exec.rank() == 1) opt.reset();
    const std::vector<float> kept = parameters();
    try {
      exec.step(dd.inputs, dd.targets);
      FAIL("the step should have been refused");
    } catch (const std::logic_error& e) {
      CHECK(std::string(e.what()).find("1 of the 2 processes have a device optimizer attached") != std::string::npos);
      CHECK(std::string(e.what()).find(exec.rank() == 1 ? "this one has not" : "this one has)") != std::string::npos);
    }
    CHECK(test::bitwise_equal(kept, parameters()));
    if (opt) CHECK(opt->updates() == 1);
  }
}

TEST_SUITE("np4") {
  TEST_CASE("mpi device executor (simulated GPUs): D=2 x P=2, 1F1B (recorded) and ZB-V, bitwise the replicas' sums") {
    train<record_1f1b, test::device::token_block_mlp, auto_d, true>();
    train<ctpipe::zb_v(2, test::microbatches), test::device::split_token_block_mlp, walk>();
  }
  TEST_CASE("mpi device executor (simulated GPUs): P=4, a skip message between processes 1 and 3, bitwise") {
    static_assert(
        test::device::sweep_table<ctpipe::one_f_one_b(4, 8), test::device::token_block_mlp>().crossings.size() == 1);
    train<ctpipe::one_f_one_b(4, 8), test::device::token_block_mlp, walk>();
  }
  TEST_CASE("mpi device executor (simulated GPUs): D=2 x P=2, a model with a layer without parameters, bitwise") {
    train<ctpipe::one_f_one_b(2, test::microbatches), test::device::relu_mlp, walk>();
  }
  TEST_CASE("mpi device executor (simulated GPUs): DualPipe at D=2 x P=2 and at P=4, bitwise") {
    int processes = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &processes);
    REQUIRE(processes == 4);
    train<ctpipe::dualpipe(2, 4), test::device::token_mlp, walk>();  // (the copies' sums, then the replicas')
    train<ctpipe::dualpipe(4, 8), test::device::split_stateful_mlp, walk>();
  }
}
