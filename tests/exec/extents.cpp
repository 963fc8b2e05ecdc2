// Microbatches of different lengths (run-time extents, ctpipe/model/extent.hpp) on the host
// executor, past what the numerics sweeps check (their model, test::block_mlp, is a graph with
// extents, trained bitwise through every schedule, 1F1B and ZB-H1 among them): a chain with
// extents through same-rank and cross-rank hand-offs, split backward and recomputing stages; only
// the used tokens cross between ranks; extents that are no extents are refused before anything
// runs.
#include "support/numerics.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace {

using test::token_mlp;

// The tensor bytes of one token that crosses each way between test::block_mlp's two halves
// ([0, 5) and [5, 10)): layer 5 reads layer 4's output, layer 8 layer 3's (a residual), and one
// gradient goes back for each; a row of matrix<4, 32> is 32 floats.
constexpr std::size_t row = test::hidden * sizeof(float);
constexpr std::size_t block_bytes_per_token = 4 * row;

template <auto Table, auto Plan>
std::size_t sent_over(const std::vector<int>& e) {
  auto m = test::make_mlp<test::block_mlp>();
  test::loss_for<test::block_mlp> l;
  const auto d = test::make_data<test::block_mlp::input_type>(static_cast<int>(e.size()));
  ctpipe::host_executor<Table, test::block_mlp, Plan, test::loss_for<test::block_mlp>> exec(m, l);
  const ctpipe::token_losses got = exec.step(d.inputs, d.targets, e);
  REQUIRE(got.total_tokens() > 0);
  return exec.sent_bytes();
}

}  // namespace

TEST_CASE("host executor: a chain with extents trains bitwise, across ranks and within one, split and recomputed") {
  constexpr int m = test::microbatches;
  SUBCASE("ZB-V, p = 2: split backward, hand-offs across ranks and between the two stages of rank 1") {
    constexpr auto plan = ctpipe::partition<token_mlp, 4>();
    test::train_against_sequential<ctpipe::make_table<ctpipe::zb_v(2, m)>(), plan, ctpipe::dispatch::table_walk,
                                   token_mlp>(20);
  }
  SUBCASE("1F1B, p = 2, every stage recomputing") {
    constexpr auto plan = ctpipe::partition<token_mlp, 2>().recompute_all();
    test::train_against_sequential<ctpipe::make_table<ctpipe::one_f_one_b(2, m)>(), plan, ctpipe::dispatch::table_walk,
                                   token_mlp>(20);
  }
}

TEST_CASE("host executor: a message carries the tokens its microbatch uses, not the capacity") {
  constexpr int m = 6;
  constexpr auto halves = test::even_stages<test::block_mlp, 2>();
  const std::vector<int> mixed{1, 4, 2, 3, 4, 1}, full(m, static_cast<int>(test::batch));
  std::size_t tokens = 0;
  for (int e : mixed) tokens += static_cast<std::size_t>(e);
  SUBCASE("1F1B, p = 2: each token's activations and gradients once each way") {
    constexpr auto table = test::table_for<ctpipe::one_f_one_b(2, m), test::block_mlp, halves>();
    CHECK(sent_over<table, halves>(mixed) == block_bytes_per_token * tokens);
    CHECK(sent_over<table, halves>(full) == block_bytes_per_token * m * test::batch);
  }
  SUBCASE("1F1B, p = 4, skip messages past a stage: bytes in proportion to the tokens") {
    constexpr auto four = test::even_stages<test::block_mlp, 4>();
    constexpr auto table = test::table_for<ctpipe::one_f_one_b(4, m), test::block_mlp, four>();
    const std::size_t at_full = sent_over<table, four>(full);
    CHECK(at_full % (m * test::batch) == 0);
    CHECK(sent_over<table, four>(mixed) == at_full / (m * test::batch) * tokens);
  }
}

TEST_CASE("host executor: extents that are no extents are refused, naming the microbatch, and nothing runs") {
  constexpr auto plan = ctpipe::partition<token_mlp, 2>();
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
  auto model = test::make_mlp<token_mlp>();
  const auto before = test::parameters(model);
  test::token_loss l;
  const auto d = test::make_data<token_mlp::input_type>(4);
  ctpipe::host_executor<table, token_mlp, plan, test::token_loss> exec(model, l);
  const auto refused = [&](std::vector<int> e, const std::string& says) {
    try {
      exec.step(d.inputs, d.targets, e);
      FAIL("accepted");
    } catch (const std::invalid_argument& x) {
      CHECK(std::string(x.what()).find(says) != std::string::npos);
    }
  };
  refused({1, 2, 3}, "3 extents for 4 microbatches");
  refused({1, 0, 3, 4}, "microbatch 1 has extent 0");
  refused({1, 2, 5, 4}, "microbatch 2 has extent 5; an extent is 1 to the model's token capacity (4)");
  CHECK(test::bitwise_equal(test::parameters(model), before));
  // The executor is still usable.
  const ctpipe::token_losses got = exec.step(d.inputs, d.targets, std::vector<int>{4, 3, 2, 1});
  CHECK(got.total_tokens() == 10);
  // A step without extents uses every token.
  exec.step(d.inputs, d.targets);
  const ctpipe::token_losses all = exec.step(d.inputs, d.targets, {});
  CHECK(all.total_tokens() == 16);

  // A model of fixed shapes takes no extents; neither does its sequential step.
  auto fixed = test::make_mlp<test::mlp>();
  test::loss fl;
  const auto fd = test::make_data(4);
  ctpipe::host_executor<table, test::mlp, ctpipe::partition<test::mlp, 2>(), test::loss> fe(fixed, fl);
  CHECK_THROWS_WITH_AS(fe.step(fd.inputs, fd.targets, std::vector<int>{1, 1, 1, 1}),
                       doctest::Contains("no tensor of the model is token-major"), std::invalid_argument);
  std::vector<double> losses(4);
  CHECK_THROWS_AS(ctpipe::sequential_step(fixed, fl, std::span<const test::input>(fd.inputs),
                                          std::span<const test::target>(fd.targets), std::vector<int>{1, 1, 1, 1},
                                          std::span<double>(losses)),
                  std::invalid_argument);
}

TEST_CASE("token_losses: the loss per token over microbatches of different lengths") {
  const double losses[] = {2.0, 6.0, 1.0};
  const int tokens[] = {1, 4, 2};
  const ctpipe::token_losses t{losses, tokens};
  CHECK(t.total_tokens() == 7);
  CHECK(t.per_token() == doctest::Approx(9.0 / 7.0));
  CHECK(ctpipe::token_losses{}.per_token() == 0.0);
}
