// The simulated CUDA executor against the sequential reference: 1F1B, and two ranks per device.
#include "support/sim_numerics.hpp"

TEST_CASE("cuda executor (simulated): 1F1B p=1 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::one_f_one_b(1, 4)>();
}
TEST_CASE("cuda executor (simulated): 1F1B p=2 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::one_f_one_b(2, 4)>();
}
TEST_CASE("cuda executor (simulated): 1F1B p=2 trains a model with a layer without parameters, bitwise") {
  test::device::every_placement<ctpipe::one_f_one_b(2, 4), test::device::relu_mlp, ctpipe::dispatch::table_walk>();
}
TEST_CASE("cuda executor (simulated): 1F1B p=3 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::one_f_one_b(3, 6)>();
}
TEST_CASE("cuda executor (simulated): 1F1B p=4 matches sequential training bitwise") {
  test::device::every_placement<ctpipe::one_f_one_b(4, 8)>();
}
TEST_CASE("cuda executor (simulated): 1F1B p=4 on two devices, two ranks each") {
  constexpr auto sched = ctpipe::one_f_one_b(4, 8);
  using block = test::device::token_block_mlp;
  constexpr auto table = test::device::sweep_table<sched, block>();
  test::device::all_ways<table, ctpipe::cuda::placement<4>{{0, 0, 1, 1}}, false, block, ctpipe::dispatch::unrolled,
                         test::device::sweep_stages<sched, block>()>(2);
}
TEST_CASE("cuda executor (simulated): 1F1B p=4 trains a chain (no graph path), bitwise") {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
  test::device::all_ways<table, ctpipe::cuda::placement<4>{{0, 0, 1, 1}}, false, test::device::stateful_mlp>(2);
}

// A chain over tokens (extents per microbatch, different every step) through 1F1B and ZB-H1 with a
// device per rank: bitwise, eager and replayed from one graph; an eager step copies only the
// extents' rows from device to device, a graph step all of each message (its copies keep their
// sizes); no allocation per step.
TEST_CASE(
    "cuda executor (simulated): microbatches of mixed lengths: a chain trains bitwise, and copies move only the extents' rows") {
  using chain = test::device::token_mlp;
  constexpr auto one_f_one_b = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
  constexpr auto zb_h1 = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
  SUBCASE("1F1B") { test::device::all_ways<one_f_one_b, ctpipe::cuda::device_per_rank<2>(), false, chain>(2); }
  SUBCASE("ZB-H1") { test::device::all_ways<zb_h1, ctpipe::cuda::device_per_rank<2>(), false, chain>(2); }
  SUBCASE("bytes") {
    using exec_t =
        test::device::sim_executor<one_f_one_b, ctpipe::cuda::device_per_rank<2>(), ctpipe::dispatch::automatic, chain>;
    sim::world& w = sim::world::get();
    w.reset(1, 2);
    chain model = test::device::make_mlp<chain>();
    test::device::sim_token_loss l;
    const auto d = test::make_data<test::token_mlp::input_type>(4);
    const test::device::basic_device_data<chain::input_type> dd(d, 0, 1);
    exec_t exec(model, l);
    const long mallocs = w.mallocs;
    constexpr std::size_t row = test::hidden * sizeof(float);  // one token of the boundary tensor
    const std::vector<int> e{1, 4, 2, 3};
    w.peer_bytes = 0;
    const ctpipe::token_losses r = exec.step(dd.inputs, dd.targets, e);
    CHECK(r.total_tokens() == 10);
    CHECK(w.peer_bytes == 2 * 10 * row);  // each microbatch's activation forward and gradient backward
    w.peer_bytes = 0;
    (void)exec.step(dd.inputs, dd.targets, e, ctpipe::cuda::launch::graph);  // the capture
    CHECK(w.peer_bytes == 2 * 4 * test::batch * row);
    w.peer_bytes = 0;
    (void)exec.step(dd.inputs, dd.targets, std::vector<int>{2, 2, 2, 2}, ctpipe::cuda::launch::graph);  // a replay
    CHECK(w.peer_bytes == 0);
    CHECK(exec.graph_captures() == 1);
    CHECK(w.mallocs == mallocs);
    // The transformer block (the graph path: messages of several tensors, a residual past a stage
    // boundary): each tensor of a message copied at its used rows, so an eager step moves the
    // extents' share of what a captured one moves. (Untied: a tied head's sum moves the same bytes
    // in both.)
    using block = test::device::untied_token_block_mlp;
    constexpr auto halves = test::device::sweep_stages<ctpipe::one_f_one_b(2, 4), block>();
    constexpr auto block_table = test::device::sweep_table<ctpipe::one_f_one_b(2, 4), block>();
    using block_exec = test::device::sim_executor<block_table, ctpipe::cuda::device_per_rank<2>(),
                                                  ctpipe::dispatch::automatic, block, halves>;
    block bm = test::device::make_mlp<block>();
    const auto bd = test::make_data<test::untied_block_mlp::input_type>(4);
    const test::device::basic_device_data<block::input_type> bdd(bd, 0, 1);
    block_exec be(bm, l);
    w.peer_bytes = 0;
    (void)be.step(bdd.inputs, bdd.targets, e);
    const std::size_t eager = w.peer_bytes;
    w.peer_bytes = 0;
    (void)be.step(bdd.inputs, bdd.targets, e, ctpipe::cuda::launch::graph);
    const std::size_t captured = w.peer_bytes;
    CHECK(captured > 0);
    CHECK(eager * 4 * test::batch == captured * 10);
    // Bad extents: refused before anything is issued, naming the microbatch.
    CHECK_THROWS_WITH_AS(exec.step(dd.inputs, dd.targets, std::vector<int>{1, 5, 2, 3}),
                         doctest::Contains("microbatch 1 has extent 5"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(exec.step(dd.inputs, dd.targets, std::vector<int>{1, 2}),
                         doctest::Contains("2 extents for 4 microbatches"), std::invalid_argument);
  }
}
