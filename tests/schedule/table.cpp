// schedule/table.hpp's chains: stage_chains, directions_of and chains_of, at compile time (a table
// made by make_table) and at run time (a dynamic_table, and a user's table type without params).
#include <doctest/doctest.h>

#include <ctpipe/ctpipe.hpp>

#include <span>
#include <vector>

namespace {

// One chain of 4 stages, 8 microbatches: every stage is its own model stage, every microbatch visits it.
constexpr ctpipe::stage_chains one{4, 8};
static_assert(one.chain_of_stage(3) == 0 && one.model_stage(3) == 3);
static_assert(one.first(0) && !one.first(1) && one.last(3) && !one.last(2));
static_assert(one.visits(2, 7) && one.first_microbatch(3) == 0);

// Two chains of 4 stages (DualPipe at p = 4): stages 4..7 copy stages 0..3; microbatches 0..3 run
// through the first chain, 4..7 through the second.
constexpr ctpipe::stage_chains two{4, 4};
static_assert(two.chain_of_stage(3) == 0 && two.chain_of_stage(4) == 1);
static_assert(two.model_stage(5) == 1 && two.model_stage(7) == 3);
static_assert(two.first(4) && two.last(7) && two.last(3) && !two.first(5));
static_assert(two.chain_of_microbatch(3) == 0 && two.chain_of_microbatch(4) == 1);
static_assert(two.visits(5, 4) && !two.visits(5, 3) && !two.visits(1, 4));
static_assert(two.first_microbatch(6) == 4 && two.first_microbatch(2) == 0);

// A table from a schedule: its schedule_info's directions, and the chains they give.
constexpr auto dualpipe = ctpipe::make_table<ctpipe::dualpipe(4, 8)>();
constexpr auto one_f_one_b = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
static_assert(ctpipe::directions_of(dualpipe) == 2 && ctpipe::directions_of(one_f_one_b) == 1);
static_assert(ctpipe::chains_of(dualpipe).length == 4 && ctpipe::chains_of(dualpipe).microbatches == 4);
static_assert(ctpipe::chains_of(one_f_one_b).length == 4 && ctpipe::chains_of(one_f_one_b).microbatches == 8);

// A user's table type with no params: one direction, one chain of all its stages.
struct bare_table {
  static constexpr std::size_t static_ranks = 0;
  std::vector<ctpipe::task> tasks;
  int ranks() const { return 1; }
  int stages() const { return 3; }
  int microbatches() const { return 5; }
  int rank_of(int) const { return 0; }
  std::span<const ctpipe::task> program(int) const { return tasks; }
};
static_assert(ctpipe::table_like<bare_table>);

}  // namespace

TEST_CASE("table: directions_of and chains_of on a table type without schedule_info") {
  const bare_table t;
  CHECK(ctpipe::directions_of(t) == 1);
  CHECK(ctpipe::chains_of(t).length == 3);
  CHECK(ctpipe::chains_of(t).microbatches == 5);
}

TEST_CASE("table: chains_of at run time, and directions that do not divide give one chain") {
  auto t = ctpipe::generate(ctpipe::dualpipe(6, 12));
  CHECK(ctpipe::directions_of(t) == 2);
  CHECK(ctpipe::chains_of(t).length == 6);  // 12 stages, two chains of 6
  CHECK(ctpipe::chains_of(t).microbatches == 6);
  CHECK(ctpipe::chains_of(t).model_stage(8) == 2);
  // verify reports such a table; chains_of falls back to one chain rather than split unevenly.
  t.params.microbatches = 11;
  CHECK(ctpipe::chains_of(t).length == 12);
  CHECK(ctpipe::chains_of(t).microbatches == 11);
  t.params.microbatches = 12;
  t.stage_rank.pop_back();  // 11 stages
  CHECK(ctpipe::chains_of(t).length == 11);
  CHECK(ctpipe::chains_of(t).microbatches == 12);
}
