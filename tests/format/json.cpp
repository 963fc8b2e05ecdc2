// JSON: the documented shape, and every schedule of the sweep written, read back (the explorer's
// reader) and verified again.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sstream>
#include <vector>

#include "explorer.hpp"
#include "support/test_util.hpp"

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

TEST_CASE("JSON of a table with skip connections: its crossings, each skip message's far stage, the skip slots") {
  const std::vector<ctpipe::crossing> skips{{0, 2, 4096}, {0, 3, 64}};
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(4, 4), skips);
  const auto text = ctpipe::to_json(t, ctpipe::analyse(t));
  const auto j = nlohmann::json::parse(text);
  CHECK(j["crossings"] ==
        nlohmann::json::parse(R"([{"from": 0, "to": 2, "bytes": 4096}, {"from": 0, "to": 3, "bytes": 64}])"));
  CHECK(j["programs"][0][2] ==
        nlohmann::json::parse(R"({"op": "SEND_SKIP_F", "stage": 0, "mb": 0, "peer": 2, "other": 2})"));
  CHECK(j["skip_value_slots"] == nlohmann::json::array({0, 0, 2, 1}));
  CHECK(j["skip_gradient_slots"] == nlohmann::json::array({2, 0, 0, 0}));
  std::istringstream in(text);
  const auto back = ctpipe::explorer::read_json(in);
  CHECK(ctpipe::same_programs(back, t));
  CHECK(back.crossings == t.crossings);  // bytes too
  // A table without crossings writes none of it.
  const auto plain = ctpipe::generate(ctpipe::one_f_one_b(4, 4));
  const auto k = nlohmann::json::parse(ctpipe::to_json(plain, ctpipe::analyse(plain)));
  CHECK_FALSE(k.contains("crossings"));
  CHECK_FALSE(k.contains("skip_value_slots"));
  // Bad crossings in a file: refused with a line.
  std::istringstream bad(
      R"({"ranks": 1, "microbatches": 1, "stage_rank": [0], "crossings": [{"from": 0, "to": 2, "bytes": -1}], "programs": [[]]})");
  CHECK_THROWS_WITH_AS(ctpipe::explorer::read_json(bad), "JSON: a crossing's \"bytes\" must be a whole number >= 0",
                       ctpipe::format_error);
}

TEST_CASE("JSON of every schedule in the sweep reads back to the same, verified table") {
  int n = 0;
  auto round_trip = [&](const auto& s) {
    const auto t = ctpipe::generate(s);
    std::istringstream in(ctpipe::to_json(t, ctpipe::analyse(t)));
    const auto back = ctpipe::explorer::read_json(in);
    CHECK(ctpipe::verify(back).ok());
    CHECK(ctpipe::same_programs(back, t));
    CHECK(!back.params.forward_only);
    ++n;
    if (s.info().ranks <= 4 && s.info().microbatches <= 8) {  // and its forward-only table, which says so
      const auto f = ctpipe::forward_table(t);
      std::istringstream fin(ctpipe::to_json(f, ctpipe::analyse(f)));
      const auto fback = ctpipe::explorer::read_json(fin);
      CHECK(fback.params.forward_only);
      CHECK(ctpipe::verify(fback).ok());
      CHECK(ctpipe::same_programs(fback, f));
    }
  };
  // The sanitizer and lean builds (CTPIPE_SHORT_SWEEP: clang under ASan+UBSan at -O0, where a round
  // trip is about 20 times slower) stop at p = 8, m = 16: every kind of schedule still, at sizes
  // where each meets its rules' edges (DualPipe and DualPipeV from m = 2p); the g++ build runs all.
#if defined(CTPIPE_SHORT_SWEEP)
  constexpr int max_p = 8, max_m = 16;
#else
  constexpr int max_p = 16, max_m = 64;
#endif
  for (int p = 1; p <= max_p; ++p)
    for (int m = 1; m <= max_m; ++m) {
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
