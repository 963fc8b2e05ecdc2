// The orders of every generator, against the worked orders of shared/SCHEDULES.md and the edge cases.
#include <doctest/doctest.h>

#include "test_util.hpp"

using test::compute_order;

TEST_CASE("1F1B p=4 m=8 matches the reference order") {
  const auto t = ctpipe::generate_compute(ctpipe::one_f_one_b(4, 8));
  CHECK(compute_order(t, 0, false) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(compute_order(t, 1, false) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  CHECK(compute_order(t, 2, false) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  CHECK(compute_order(t, 3, false) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("interleaved p=4 m=8 v=2 matches the reference order") {
  const auto t = ctpipe::generate_compute(ctpipe::interleaved(4, 8, 2));
  CHECK(
      compute_order(t, 0, true) ==
      "0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 0F4 0F5 0F6 4B0 0F7 4B1 4F4 4B2 4F5 4B3 4F6 0B0 4F7 0B1 0B2 0B3 4B4 4B5 4B6 4B7 0B4 0B5 0B6 0B7");
  CHECK(
      compute_order(t, 1, true) ==
      "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5F3 1F4 5B0 1F5 5B1 1F6 5B2 1F7 5B3 5F4 1B0 5F5 1B1 5F6 1B2 5F7 1B3 5B4 5B5 5B6 5B7 1B4 1B5 1B6 1B7");
  CHECK(
      compute_order(t, 2, true) ==
      "2F0 2F1 2F2 2F3 6F0 6F1 6F2 6B0 6F3 6B1 2F4 6B2 2F5 6B3 2F6 2B0 2F7 2B1 6F4 2B2 6F5 2B3 6F6 6B4 6F7 6B5 6B6 6B7 2B4 2B5 2B6 2B7");
  CHECK(
      compute_order(t, 3, true) ==
      "3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 3F4 3B0 3F5 3B1 3F6 3B2 3F7 3B3 7F4 7B4 7F5 7B5 7F6 7B6 7F7 7B7 3B4 3B5 3B6 3B7");
}

TEST_CASE("naive and GPipe orders") {
  const auto n = ctpipe::generate_compute(ctpipe::naive(3, 3));
  CHECK(compute_order(n, 1, false) == "F0 B0 F1 B1 F2 B2");
  const auto g = ctpipe::generate_compute(ctpipe::gpipe(3, 3));
  CHECK(compute_order(g, 2, false) == "F0 F1 F2 B0 B1 B2");
}

TEST_CASE("interleaved with one chunk is 1F1B") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m) {
      CAPTURE(p);
      CAPTURE(m);
      if (!ctpipe::validate(ctpipe::interleaved(p, m, 1)).ok()) continue;
      CHECK(ctpipe::same_programs(ctpipe::generate(ctpipe::interleaved(p, m, 1)),
                                  ctpipe::generate(ctpipe::one_f_one_b(p, m))));
    }
}

TEST_CASE("edge cases run to completion: p = 1, m = 1, m < p") {
  for (auto s : {ctpipe::naive(1, 4), ctpipe::gpipe(1, 1), ctpipe::one_f_one_b(1, 3), ctpipe::interleaved(1, 4, 3),
                 ctpipe::naive(4, 1), ctpipe::gpipe(5, 2), ctpipe::one_f_one_b(8, 3), ctpipe::interleaved(4, 2, 2),
                 ctpipe::interleaved(8, 1, 4), ctpipe::interleaved(4, 3, 3, 3)}) {
    CAPTURE(ctpipe::schedule_name(s.kind));
    CAPTURE(s.ranks);
    CAPTURE(s.microbatches);
    const auto t = ctpipe::generate(s);
    const auto v = ctpipe::verify(t);
    CHECK_MESSAGE(v.ok(), ctpipe::message(v));
  }
  // p = 1: everything on one rank, no comm ops at all.
  const auto one = ctpipe::generate(ctpipe::interleaved(1, 4, 3));
  for (const auto& x : one.program(0)) CHECK(ctpipe::is_compute(x.op));
}

TEST_CASE("interleaved with m < p uses one group of m microbatches") {
  const auto t = ctpipe::generate_compute(ctpipe::interleaved(4, 2, 2));
  CHECK(ctpipe::interleaved(4, 2, 2).effective_group() == 2);
  CHECK(compute_order(t, 3, true) == "3F0 3F1 7F0 7B0 7F1 7B1 3B0 3B1");
}

TEST_CASE("interleaved with a larger group: p=2 m=6 G=3 v=2") {
  const auto t = ctpipe::generate_compute(ctpipe::interleaved(2, 6, 2, 3));
  // Forward order: chunk 0 of mb 0..2, chunk 1 of mb 0..2, then the next group.
  // Warm-up on rank 0: 2(p-1) + (v-1)G = 5.
  CHECK(compute_order(t, 0, true) ==
        "0F0 0F1 0F2 2F0 2F1 2F2 2B0 0F3 2B1 0F4 2B2 0F5 0B0 2F3 0B1 2F4 0B2 2F5 2B3 2B4 2B5 0B3 0B4 0B5");
  CHECK(ctpipe::verify(ctpipe::lower(t)).ok());
}

TEST_CASE("lowering: receive just before its consumer, send right after its producer, none within a rank") {
  const auto t = ctpipe::generate(ctpipe::one_f_one_b(2, 2));
  using ctpipe::op_kind;
  const auto r0 = t.program(0);
  const auto r1 = t.program(1);
  // rank 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1
  REQUIRE(r0.size() == 8);
  CHECK(r0[1] == ctpipe::task{op_kind::send_forward, 0, 0, 1});
  CHECK(r0[4] == ctpipe::task{op_kind::recv_backward, 0, 0, 1});
  CHECK(r0[5] == ctpipe::task{op_kind::backward, 0, 0, -1});
  // rank 1: RECV_F0 F0 B0 SEND_B0 RECV_F1 F1 B1 SEND_B1
  REQUIRE(r1.size() == 8);
  CHECK(r1[0] == ctpipe::task{op_kind::recv_forward, 1, 0, 0});
  CHECK(r1[3] == ctpipe::task{op_kind::send_backward, 1, 0, 0});
  CHECK(r1[4] == ctpipe::task{op_kind::recv_forward, 1, 1, 0});
  // Interleaved p=2 v=2: stage 1 -> 2 crosses back to rank 0; lowering a lowered table changes nothing.
  const auto i = ctpipe::generate(ctpipe::interleaved(2, 4, 2));
  CHECK(ctpipe::same_programs(ctpipe::lower(i), i));
}

TEST_CASE("compile-time and run-time generation give the same table") {
  constexpr auto a = ctpipe::make_table<ctpipe::interleaved(4, 8, 2)>();
  CHECK(ctpipe::same_programs(a, ctpipe::generate(ctpipe::interleaved(4, 8, 2))));
  constexpr auto b = ctpipe::make_table<ctpipe::gpipe(3, 5)>();
  CHECK(ctpipe::same_programs(b, ctpipe::generate(ctpipe::gpipe(3, 5))));
  constexpr auto c = ctpipe::make_compute_table<ctpipe::naive(2, 3)>();
  CHECK(ctpipe::same_programs(c, ctpipe::generate_compute(ctpipe::naive(2, 3))));
}
