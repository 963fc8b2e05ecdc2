// CSV (PyTorch's cells): written, read back, and malformed input refused with the line and cell.
#include <doctest/doctest.h>

#include <vector>

#include "support/test_util.hpp"

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
  // A forward-only table: recognised from its having no op of the backward.
  const auto forward = ctpipe::forward_table(ctpipe::generate(ctpipe::interleaved(4, 8, 2)));
  const auto back = test::from_csv(ctpipe::to_csv(forward));
  CHECK(back.params.forward_only);
  CHECK(ctpipe::same_programs(back, forward));
  CHECK(ctpipe::verify(back).ok());
  CHECK(!test::from_csv(ctpipe::to_csv(ctpipe::generate(ctpipe::gpipe(2, 2)))).params.forward_only);
  // PyTorch-style cells, idle as empty cells.
  const auto csv = ctpipe::to_csv(ctpipe::generate(ctpipe::gpipe(2, 2)), ctpipe::cost_model{1, 2}, false);
  CHECK(csv == "0F0,0F1,,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n");
}

TEST_CASE("CSV round trip of skip messages: each names its far stage, and the crossings follow from them") {
  const std::vector<ctpipe::crossing> skips{{0, 2, 0}, {1, 3, 0}};
  for (const auto& t : {ctpipe::generate(ctpipe::one_f_one_b(4, 4), skips), ctpipe::generate(ctpipe::zb_v(2, 4), skips),
                        ctpipe::generate(ctpipe::dualpipe(4, 8), std::vector<ctpipe::crossing>{{0, 3, 0}})}) {
    const auto back = test::from_csv(ctpipe::to_csv(t));
    CHECK(ctpipe::same_programs(back, t));
    CHECK(back.crossings == t.crossings);
    CHECK(ctpipe::verify(back).ok());
  }
  const auto csv = ctpipe::to_csv(ctpipe::generate(ctpipe::naive(3, 1), std::vector<ctpipe::crossing>{{0, 2, 0}}),
                                  ctpipe::cost_model{}, true, false);
  CHECK(csv ==
        "0F0,0SEND_F0,0SEND_SKIP_F0>2,0RECV_B0,0RECV_SKIP_B0<2,0B0\n"
        "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0\n"
        "2RECV_F0,2RECV_SKIP_F0<0,2F0,2B0,2SEND_B0,2SEND_SKIP_B0>0\n");
}

TEST_CASE("malformed CSV is a format_error naming the line and cell") {
  CHECK_THROWS_WITH_AS(test::from_csv("0F0,0X0\n"),
                       "line 1, cell 2 '0X0': unknown op 'X' (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
                       "SEND_SKIP_F, RECV_SKIP_F, SEND_SKIP_B or RECV_SKIP_B)",
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F0,0SEND_SKIP_F0\n"),
                       "line 1, cell 2 '0SEND_SKIP_F0': a skip message names its far stage after '>', as in "
                       "0SEND_SKIP_F0>2",
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F0,0RECV_SKIP_B0>2\n"),
                       doctest::Contains("a skip message names its far stage after '<', as in 2RECV_SKIP_F0<0"),
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F0>2\n"), doctest::Contains("only a skip message names a far stage"),
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0SEND_SKIP_F0>x\n"),
                       doctest::Contains("expected the far stage's number after '>'"), ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F0\nF1\n"),
                       doctest::Contains("line 2, cell 1 'F1': expected a stage number first"), ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("0F\n"), doctest::Contains("expected a microbatch number last"),
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv(""), doctest::Contains("no ranks"), ctpipe::format_error);
  CHECK_THROWS_WITH_AS(test::from_csv("1F0,1B0\n"), doctest::Contains("stage 0 has no ops"), ctpipe::format_error);
  CHECK_THROWS_AS(test::from_csv("0F99999999999\n"), ctpipe::format_error);
}
