// Text, JSON and CSV: written, read back, verified again.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "explorer.hpp"
#include "test_util.hpp"

TEST_CASE("JSON has the documented shape") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(4, 8));
  const auto j = nlohmann::json::parse(ctpipe::to_json(t, ctpipe::analyse(t, ctpipe::cost_model{1, 2})));
  CHECK(j["schedule"] == "1f1b");
  CHECK(j["ranks"] == 4);
  CHECK(j["microbatches"] == 8);
  CHECK(j["chunks"] == 1);
  CHECK(j["stages"] == 4);
  CHECK(j["stage_rank"] == nlohmann::json::array({0, 1, 2, 3}));
  CHECK(j["programs"][0][0] == nlohmann::json::parse(R"({"op": "F", "stage": 0, "mb": 0})"));
  CHECK(j["programs"][0][1] == nlohmann::json::parse(R"({"op": "SEND_F", "stage": 0, "mb": 0, "peer": 1})"));
  CHECK(j["programs"][1][0] == nlohmann::json::parse(R"({"op": "RECV_F", "stage": 1, "mb": 0, "peer": 0})"));
  CHECK(j["makespan"] == 33.0);
  CHECK(j["bubble_fraction"] == 0.2727);
  CHECK(j["peak_live"] == nlohmann::json::array({4, 3, 2, 1}));
}

TEST_CASE("JSON of every schedule in the sweep reads back to the same, verified table") {
  int n = 0;
  auto round_trip = [&](const auto& s) {
    const auto t = ctpipe::generate(s);
    std::istringstream in(ctpipe::to_json(t, ctpipe::analyse(t)));
    const auto back = ctpipe::explorer::read_json(in);
    CHECK(ctpipe::verify(back).ok());
    CHECK(ctpipe::same_programs(back, t));
    ++n;
  };
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 64; ++m) {
      round_trip(ctpipe::naive(p, m));
      round_trip(ctpipe::gpipe(p, m));
      round_trip(ctpipe::one_f_one_b(p, m));
      round_trip(ctpipe::zb_h1(p, m));
      round_trip(ctpipe::zb_v(p, m));
      if (m >= 2 * p) round_trip(ctpipe::dualpipe_v(p, m));
      if (p % 2 == 0 && m % 2 == 0 && m >= 2 * p) round_trip(ctpipe::dualpipe(p, m));
      for (int v = 2; v <= 4; ++v) {
        if (ctpipe::validate(ctpipe::interleaved(p, m, v)).ok()) round_trip(ctpipe::interleaved(p, m, v));
        if (ctpipe::validate(ctpipe::interleaved_zero_bubble(p, m, v)).ok())
          round_trip(ctpipe::interleaved_zero_bubble(p, m, v));
      }
    }
  MESSAGE("JSON round trips: ", n);
}

TEST_CASE("CSV round trip, with and without comm ops") {
  auto round_trip = [](const auto& s) {
    const auto t = ctpipe::generate(s);
    CHECK(ctpipe::same_programs(test::from_csv(ctpipe::to_csv(t)), t));
    CHECK(ctpipe::same_programs(test::from_csv(ctpipe::to_csv(t, ctpipe::cost_model{}, false)), t));
  };
  round_trip(ctpipe::gpipe(3, 4));
  round_trip(ctpipe::interleaved(4, 8, 2));
  round_trip(ctpipe::naive(2, 2));
  round_trip(ctpipe::one_f_one_b(5, 3));
  round_trip(ctpipe::zb_h2(4, 8));
  round_trip(ctpipe::zb_v(3, 5));
  round_trip(ctpipe::dualpipe_v(4, 8));
  round_trip(ctpipe::dualpipe(4, 8));  // two directions, recognised from the microbatches' stages
  CHECK(test::from_csv(ctpipe::to_csv(ctpipe::generate(ctpipe::dualpipe(6, 12)))).params.directions == 2);
  CHECK(test::from_csv(ctpipe::to_csv(ctpipe::generate(ctpipe::zb_v(2, 4)))).params.directions == 1);
  // PyTorch-style cells, idle as empty cells.
  const auto csv = ctpipe::to_csv(ctpipe::generate(ctpipe::gpipe(2, 2)), ctpipe::cost_model{1, 2}, false);
  CHECK(csv == "0F0,0F1,,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n");
}

TEST_CASE("malformed CSV is a format_error naming the line and cell") {
  CHECK_THROWS_WITH_AS(test::from_csv("0F0,0X0\n"),
                       "line 1, cell 2 '0X0': unknown op 'X' (expected F, B, I, W, SEND_F, RECV_F, SEND_B or RECV_B)",
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F0\nF1\n"),
                       doctest::Contains("line 2, cell 1 'F1': expected a stage number first"), ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F\n"), doctest::Contains("expected a microbatch number last"),
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv(""), doctest::Contains("no ranks"), ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("1F0,1B0\n"), doctest::Contains("stage 0 has no ops"), ctpipe::format_error);
  CHECK_THROWS_AS(test::from_csv("0F99999999999\n"), ctpipe::format_error);
}

TEST_CASE("text grid shows idle time and every rank") {
  const auto grid = ctpipe::timeline_grid(ctpipe::generate(ctpipe::gpipe(2, 2)), ctpipe::cost_model{1, 1});
  CHECK(grid == "r0 | 0F0 0F1 .   .   0B0 0B1\nr1 | .   1F0 1F1 1B0 1B1 .\n");
  const auto g2 = ctpipe::timeline_grid(ctpipe::generate(ctpipe::gpipe(2, 1)), ctpipe::cost_model{1, 2});
  CHECK(g2 == "r0 | 0F0 .   .   .   0B0----\nr1 | .   1F0 1B0---- .   .\n");
}
