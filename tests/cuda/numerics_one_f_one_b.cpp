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
  using block = test::device::block_mlp;
  constexpr auto table = test::device::sweep_table<sched, block>();
  test::device::all_ways<table, ctpipe::cuda::placement<4>{{0, 0, 1, 1}}, false, block, ctpipe::dispatch::unrolled,
                         test::device::sweep_stages<sched, block>()>(2);
}
TEST_CASE("cuda executor (simulated): 1F1B p=4 trains a chain (no graph path), bitwise") {
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
  test::device::all_ways<table, ctpipe::cuda::placement<4>{{0, 0, 1, 1}}, false, test::device::stateful_mlp>(2);
}
