// Shared parameters on the host executor, past what the sweeps check (their model, test::block_mlp,
// ties its head to layer 0 in every schedule): a group of three members on three ranks, two of them
// on one rank, the copies started equal at construction, and a buffer shared by hand across ranks
// refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "support/numerics.hpp"

namespace {

TEST_CASE("host executor: a group of three shared layers on three ranks (1F1B, p=4), bitwise") {
  constexpr auto stages = test::even_stages<test::group_mlp, 4>();
  static_assert(stages.stage_of_layer(1) == 1 && stages.stage_of_layer(3) == 2 && stages.stage_of_layer(5) == 3);
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, test::microbatches)>();
  test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::group_mlp>(20);
}

TEST_CASE("host executor: two members of a group on one rank and one on another (interleaved, p=2), bitwise") {
  constexpr auto stages = test::even_stages<test::group_mlp, 4>();
  constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, test::microbatches, 2)>();
  static_assert(table.stage_rank[1] == 1 && table.stage_rank[2] == 0 && table.stage_rank[3] == 1);
  test::train_against_sequential<table, stages, ctpipe::dispatch::table_walk, test::group_mlp>(20);
}

TEST_CASE("host executor: construction starts a group's copies equal, from its first layer") {
  test::group_mlp m = test::make_mlp<test::group_mlp>();
  std::fill(m.layer<5>().params.begin(), m.layer<5>().params.end(), 3.0f);
  test::loss l;
  constexpr auto stages = test::even_stages<test::group_mlp, 4>();
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, test::microbatches)>();
  ctpipe::host_executor<table, test::group_mlp, stages, test::loss> exec(m, l);
  const auto first = m.layer<1>().shared_parameters(), fifth = m.layer<5>().shared_parameters();
  CHECK(std::equal(first.begin(), first.end(), fifth.begin()));
  CHECK(m.layer<5>().params.back() == 3.0f);  // the bias is the layer's own
}

using test::borrowed;
using borrowing_mlp = ctpipe::model<ctpipe::layers::dense<test::batch, test::features, test::hidden>, test::hh,
                                    borrowed, ctpipe::layers::dense<test::batch, test::hidden, test::classes>>;
using declared_and_borrowing_mlp =
    ctpipe::model<ctpipe::layers::dense<test::batch, test::features, test::hidden>, test::hh,
                  ctpipe::shared_with<1, borrowed>, ctpipe::layers::dense<test::batch, test::hidden, test::classes>>;

TEST_CASE("host executor: parameters shared by hand between ranks are refused at construction") {
  test::loss l;
  SUBCASE("on two ranks: refused, naming both layers and the declaration") {
    borrowing_mlp m = test::make_mlp<borrowing_mlp>();
    m.layer<2>().w = m.layer<1>().parameters();
    m.layer<2>().g = m.layer<1>().gradients();
    constexpr auto stages = ctpipe::stage_bounds<borrowing_mlp, 0, 2, 4>();
    constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
    using exec_t = ctpipe::host_executor<table, borrowing_mlp, stages, test::loss>;
    CHECK_THROWS_WITH_AS(exec_t(m, l),
                         doctest::Contains("layers 1 and 2 (on ranks 0 and 1) hold overlapping parameters() or "
                                           "gradients(): one buffer shared by hand"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(exec_t(m, l), doctest::Contains("ctpipe::shared_with<1, ...>"), std::invalid_argument);
    // On one rank the two layers never run at once: one buffer, as the user wrote it.
    constexpr auto one = ctpipe::make_table<ctpipe::one_f_one_b(1, 4)>();
    ctpipe::host_executor<one, borrowing_mlp, ctpipe::partition<borrowing_mlp, 1>(), test::loss> alone(m, l);
    CHECK(alone.ranks == 1);
  }
  SUBCASE("declared shared and sharing one buffer: refused, on any ranks") {
    declared_and_borrowing_mlp m;
    m.layer<2>().w = m.layer<1>().shared_parameters();
    m.layer<2>().g = m.layer<1>().shared_gradients();
    constexpr auto one = ctpipe::make_table<ctpipe::one_f_one_b(1, 4)>();
    using exec_t = ctpipe::host_executor<one, declared_and_borrowing_mlp,
                                         ctpipe::partition<declared_and_borrowing_mlp, 1>(), test::loss>;
    CHECK_THROWS_WITH_AS(exec_t(m, l),
                         doctest::Contains("layers 1 and 2 share parameters (ctpipe::shared_with) and "
                                           "also hold overlapping"),
                         std::invalid_argument);
  }
}

}  // namespace
