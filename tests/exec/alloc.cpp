// After warm-up a step allocates nothing: every operator new in this program is counted.
#include <doctest/doctest.h>

#include "support/counted_new.hpp"
#include "support/mlp.hpp"

namespace {
template <auto Table, auto Plan, ctpipe::dispatch Dispatch = ctpipe::dispatch::unrolled,
          class Model = test::stateful_mlp>
long allocations_per_step() {
  auto m = test::make_mlp<Model>();
  test::loss_for<Model> l;
  const auto d = test::make_data<typename Model::input_type>(Table.params.microbatches);
  ctpipe::host_executor<Table, Model, Plan, test::loss_for<Model>, Dispatch> exec(m, l);
  // A model with extents: microbatches of mixed lengths, new ones every step.
  std::vector<std::vector<int>> e;
  for (int i = 0; i < 7; ++i)
    e.push_back(Model::token_capacity > 0 ? test::extents(Table.params.microbatches, static_cast<std::uint64_t>(i))
                                          : std::vector<int>{});
  exec.step(d.inputs, d.targets, e[0]);  // warm-up
  exec.step(d.inputs, d.targets, e[1]);
  const long before = test::allocations.load();
  for (int i = 0; i < 5; ++i) exec.step(d.inputs, d.targets, e[static_cast<std::size_t>(2 + i)]);
  return test::allocations.load() - before;
}
}  // namespace

TEST_CASE("host executor: a step allocates nothing after warm-up") {
  const long setup_before = test::allocations.load();
  {
    auto m = test::make_mlp<test::stateful_mlp>();
    test::loss l;
    constexpr auto t = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
    ctpipe::host_executor<t, test::stateful_mlp, ctpipe::partition<test::stateful_mlp, 4>(), test::loss> exec(m, l);
  }
  CHECK(test::allocations.load() > setup_before);  // the counter counts: construction allocates
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>(),
                             ctpipe::partition<test::stateful_mlp, 4>()>() == 0);
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::interleaved(2, 8, 2)>(),
                             ctpipe::partition<test::stateful_mlp, 4>()>() == 0);
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::gpipe(1, 8)>(),
                             ctpipe::partition<test::stateful_mlp, 1>().recompute_all()>() == 0);
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::interleaved(2, 8, 2)>(),
                             ctpipe::partition<test::stateful_mlp, 4>(), ctpipe::dispatch::table_walk>() == 0);
  // Split backward (I and W), V placement, overlapped pairs.
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::zb_v(2, 8)>(), ctpipe::partition<test::stateful_mlp, 4>()>() ==
        0);
  CHECK(allocations_per_step<ctpipe::make_table<ctpipe::dualpipe_v(2, 8)>(), ctpipe::partition<test::stateful_mlp, 4>(),
                             ctpipe::dispatch::table_walk>() == 0);
  // A graph model with extents: skip messages between ranks (1F1B at 6 stages) and within one
  // (interleaved), each microbatch of its own length.
  constexpr auto six = test::even_stages<test::block_mlp, 6>();
  CHECK(allocations_per_step<test::table_for<ctpipe::one_f_one_b(6, 6), test::block_mlp, six>(), six,
                             ctpipe::dispatch::table_walk, test::block_mlp>() == 0);
  constexpr auto four = test::even_stages<test::block_mlp, 4>();
  CHECK(allocations_per_step<test::table_for<ctpipe::interleaved(2, 8, 2), test::block_mlp, four>(), four,
                             ctpipe::dispatch::unrolled, test::block_mlp>() == 0);
}
