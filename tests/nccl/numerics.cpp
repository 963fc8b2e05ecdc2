// The NCCL executor on the stream simulator and the NCCL stand-in (nccl_sim.hpp): every schedule
// the executors run, one simulated process per rank, bitwise against sequential training, eager and
// graph steps, three interleavings each. P = 1..4 for 1F1B; the others at the sizes that exercise
// what is theirs (two boundaries between one pair of ranks in interleaved, the V turn on one rank in
// ZB-V and DualPipeV, I and W, overlapped pairs F&B, DualPipe's two copies of each stage). The
// sweep is spread over three sources, so that the build compiles them at once: here 1F1B, naive,
// GPipe, interleaved, D = 4 and extents; the split-backward schedules in numerics_split.cpp;
// DualPipe and D = 2 in numerics_dualpipe.cpp.
#include "support/nccl_numerics.hpp"

using test::nccl::every_way;
// Most tables walk (the task code is the same either way; unrolling costs compile time): 1F1B p = 2
// and interleaved with groups of 4 unroll (DualPipeV p = 2, DualPipe p = 2 and 1F1B at D = 2 in the
// other two sources).
constexpr auto walk = ctpipe::dispatch::table_walk;
using mlp = test::device::token_block_mlp;

TEST_CASE("nccl executor (simulated): 1F1B p=1..4 matches sequential training bitwise") {
  SUBCASE("p=1") { every_way<ctpipe::one_f_one_b(1, 4), mlp, walk>(); }
  SUBCASE("p=2, each run's last step recorded") {
    every_way<ctpipe::one_f_one_b(2, 4), mlp, ctpipe::dispatch::automatic, true>();
  }
  SUBCASE("p=3") { every_way<ctpipe::one_f_one_b(3, 6), mlp, walk>(); }
  SUBCASE("p=4") { every_way<ctpipe::one_f_one_b(4, 8), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): naive and GPipe p=2 match sequential training bitwise") {
  SUBCASE("naive") { every_way<ctpipe::naive(2, 3), mlp, walk>(); }
  SUBCASE("gpipe") { every_way<ctpipe::gpipe(2, 4), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): interleaved matches sequential training bitwise") {
  SUBCASE("p=2 v=2") { every_way<ctpipe::interleaved(2, 4, 2), mlp, walk>(); }
  SUBCASE("p=2 v=2, groups of 4 (two FIFOs cross)") { every_way<ctpipe::interleaved(2, 8, 2, 4)>(); }
  SUBCASE("p=4 v=2") { every_way<ctpipe::interleaved(4, 8, 2), mlp, walk>(); }
}
TEST_CASE("nccl executor (simulated): D = 4 replicas x P = 1 rank") {
  every_way<ctpipe::one_f_one_b(1, 2), mlp, walk>(4);
}

// A chain over tokens at P = 2: bitwise with mixed extents, eager and graph; an eager step sends
// each message at its microbatch's used rows and a graph step whole; processes of a replica that
// give different extents are told so at the step's end, naming the microbatch.
TEST_CASE("nccl executor (simulated): extents: messages at their used rows, and processes that disagree are refused") {
  using chain = test::device::token_mlp;
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
  using exec_t = test::nccl::sim_executor<table, chain>;
  SUBCASE("bitwise") {
    test::nccl::train_against_sequential<exec_t, chain>(1, ctpipe::cuda::launch::eager);
    test::nccl::train_against_sequential<exec_t, chain>(2, ctpipe::cuda::launch::graph);
  }
  SUBCASE("bytes, and extents that differ between processes") {
    sim::world::get().reset(1, 2);
    sim::nccl::state& net = sim::nccl::state::get();
    net.reset();
    {
      const std::vector<sim::nccl::handle*> world = sim::nccl::make_world(2);
      std::vector<chain> models{test::device::make_mlp<chain>(), test::device::make_mlp<chain>()};
      std::vector<test::device::sim_token_loss> losses(2);
      const auto d = test::make_data<test::token_mlp::input_type>(4);
      std::vector<std::unique_ptr<test::device::basic_device_data<chain::input_type>>> data;
      std::vector<std::unique_ptr<exec_t>> exec;
      for (int q = 0; q < 2; ++q) {
        data.push_back(std::make_unique<test::device::basic_device_data<chain::input_type>>(d, q, q));
        exec.push_back(
            std::make_unique<exec_t>(models[static_cast<std::size_t>(q)], losses[static_cast<std::size_t>(q)],
                                     ctpipe::nccl::job<sim::nccl::net>{world[static_cast<std::size_t>(q)], q, 2, q}));
      }
      const auto run = [&](std::vector<int> e0, std::vector<int> e1, ctpipe::cuda::launch how) {
        exec[0]->enqueue(data[0]->inputs, data[0]->targets, e0, how);
        exec[1]->enqueue(data[1]->inputs, data[1]->targets, e1, how);
      };
      constexpr std::size_t row = test::hidden * sizeof(float);  // one token of the boundary tensor
      net.sent_bytes = 0;
      run({1, 4, 2, 3}, {1, 4, 2, 3}, ctpipe::cuda::launch::eager);
      for (auto& x : exec) CHECK(x->wait().size() == 4);
      CHECK(exec[0]->tokens()[1] == 4);
      CHECK(net.sent_bytes == 2 * 10 * row);  // each microbatch's activation forward and gradient backward
      net.sent_bytes = 0;
      run({1, 4, 2, 3}, {1, 4, 2, 3}, ctpipe::cuda::launch::graph);
      for (auto& x : exec) CHECK(x->wait().size() == 4);
      // The capture: every message whole, after one word each way that connects the peers.
      CHECK(net.sent_bytes == 2 * 4 * test::batch * row + 2 * sizeof(double));
      // A graph step whose processes disagree on microbatch 1's extent: the step runs (its messages
      // are whole), and each process is told at its end.
      run({1, 4, 2, 3}, {1, 3, 2, 3}, ctpipe::cuda::launch::graph);
      for (auto& x : exec)
        CHECK_THROWS_WITH_AS(x->wait(), doctest::Contains("microbatch 1: this process gave extent"),
                             std::invalid_argument);
      // And the next step, agreed, is right again.
      run({2, 2, 2, 2}, {2, 2, 2, 2}, ctpipe::cuda::launch::graph);
      for (auto& x : exec) CHECK(x->tokens().size() == 4);
      for (auto& x : exec) CHECK(x->wait().size() == 4);
    }
    CHECK(net.violations.empty());
  }
}
