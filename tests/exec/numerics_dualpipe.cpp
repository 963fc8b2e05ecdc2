// dualpipe at p = 2 and 4: two pipelines over mirrored copies of the model's p stages, fed from
// both ends, each with half of the microbatches (rank r runs stage r of the first and stage p-1-r
// of the second). Bitwise equal to the reference that sums each half's microbatches in order, then
// adds the first half's sum and the second's: what the executor does once a stage's two copies
// have run their last backward. A model that is a chain (the stateful MLP: layer norm, attention,
// dropout), and one over microbatches of mixed lengths (token_mlp).
#include "support/numerics.hpp"

namespace {

template <int P, class Model, ctpipe::dispatch D, bool Recompute = false>
void check_dualpipe() {
  constexpr auto table = ctpipe::make_table<ctpipe::dualpipe(P, test::microbatches)>();
  static_assert(table.stages() == 2 * P && ctpipe::directions_of(table) == 2);
  constexpr auto even = test::even_stages<Model, P>();  // the model's stages: one chain's
  constexpr auto stages = Recompute ? even.recompute_all() : even;
  test::train_against_sequential<table, stages, D, Model>();
}

}  // namespace

TEST_CASE("host executor: dualpipe p=2 matches the two halves' sequential training bitwise") {
  if constexpr (!test::short_sweep) {  // (the sanitizer and clang builds: the table walk, tests/support/numerics.hpp)
    SUBCASE("unrolled") { check_dualpipe<2, test::stateful_mlp, ctpipe::dispatch::unrolled>(); }
  }
  SUBCASE("table walk") { check_dualpipe<2, test::stateful_mlp, ctpipe::dispatch::table_walk>(); }
  SUBCASE("microbatches of mixed lengths") { check_dualpipe<2, test::token_mlp, ctpipe::dispatch::table_walk>(); }
  SUBCASE("every stage recomputing its forward") {
    check_dualpipe<2, test::stateful_mlp, ctpipe::dispatch::table_walk, true>();
  }
}

TEST_CASE("host executor: dualpipe p=4 matches the two halves' sequential training bitwise") {
  check_dualpipe<4, test::stateful_mlp, ctpipe::dispatch::table_walk>();
}
