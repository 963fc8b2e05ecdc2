// The orders of every generator, against the worked orders of docs/schedules.md and the edge cases.
#include <doctest/doctest.h>

#include "support/test_util.hpp"

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
  auto check_one = [](const auto& s) {
    CAPTURE(s.info().name.view());
    CAPTURE(s.info().ranks);
    CAPTURE(s.info().microbatches);
    const auto t = ctpipe::generate(s);
    const auto v = ctpipe::verify(t);
    CHECK_MESSAGE(v.ok(), ctpipe::message(v));
  };
  for (auto s : {ctpipe::naive(1, 4), ctpipe::naive(4, 1)}) check_one(s);
  for (auto s : {ctpipe::gpipe(1, 1), ctpipe::gpipe(5, 2)}) check_one(s);
  for (auto s : {ctpipe::one_f_one_b(1, 3), ctpipe::one_f_one_b(8, 3)}) check_one(s);
  for (auto s : {ctpipe::interleaved(1, 4, 3), ctpipe::interleaved(4, 2, 2), ctpipe::interleaved(8, 1, 4),
                 ctpipe::interleaved(4, 3, 3, 3)})
    check_one(s);
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
  // An op on a rank that does not hold its stage (verification's wrong_rank) is laid with its
  // neighbours' messages only, never with one from its own stage's rank: stage 0 of one stage
  // (placed on rank 0), its microbatch 1 on rank 1, gets no receive or send.
  const auto misplaced = ctpipe::lower(test::from_csv("0F0,0B0\n0F1,0B1\n"));
  REQUIRE(misplaced.program(1).size() == 2);
  CHECK(misplaced.program(1)[0] == ctpipe::task{op_kind::forward, 0, 1, -1});
  CHECK(ctpipe::verify(misplaced).rule == ctpipe::check_rule::wrong_rank);
}

TEST_CASE("compile-time and run-time generation give the same table") {
  constexpr auto a = ctpipe::make_table<ctpipe::interleaved(4, 8, 2)>();
  CHECK(ctpipe::same_programs(a, ctpipe::generate(ctpipe::interleaved(4, 8, 2))));
  constexpr auto b = ctpipe::make_table<ctpipe::gpipe(3, 5)>();
  CHECK(ctpipe::same_programs(b, ctpipe::generate(ctpipe::gpipe(3, 5))));
  constexpr auto c = ctpipe::make_compute_table<ctpipe::naive(2, 3)>();
  CHECK(ctpipe::same_programs(c, ctpipe::generate_compute(ctpipe::naive(2, 3))));
}

// docs/schedules.md: the worked orders at p = 4, m = 8.
namespace {
void check_orders(const ctpipe::dynamic_table& t, bool with_stage, const char* const (&orders)[4]) {
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(compute_order(t, r, with_stage) == orders[r]);
  }
  const auto v = ctpipe::verify(ctpipe::lower(t));
  CHECK_MESSAGE(v.ok(), ctpipe::message(v));
}
}  // namespace

TEST_CASE("ZB-H1 p=4 m=8 matches the reference order") {
  const char* const orders[4] = {"F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 W4 I5 W5 I6 W6 I7 W7",
                                 "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7",
                                 "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7",
                                 "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7"};
  check_orders(ctpipe::generate_compute(ctpipe::zb_h1(4, 8)), false, orders);
  // PyTorch's ZB1P with one chunk is ZB-H1.
  check_orders(ctpipe::generate_compute(ctpipe::interleaved_zero_bubble(4, 8, 1)), false, orders);
}

TEST_CASE("ZB-H2 p=4 m=8 matches the reference order") {
  const char* const orders[4] = {"F0 F1 F2 F3 F4 F5 F6 I0 W0 F7 I1 W1 I2 W2 I3 W3 I4 W4 I5 W5 I6 W6 I7 W7",
                                 "F0 F1 F2 F3 F4 I0 F5 I1 F6 I2 W0 F7 I3 W1 I4 W2 I5 W3 I6 W4 I7 W5 W6 W7",
                                 "F0 F1 F2 I0 F3 I1 F4 I2 F5 I3 F6 I4 W0 F7 I5 W1 I6 W2 I7 W3 W4 W5 W6 W7",
                                 "F0 I0 F1 I1 F2 I2 F3 I3 F4 I4 F5 I5 F6 I6 W0 F7 I7 W1 W2 W3 W4 W5 W6 W7"};
  check_orders(ctpipe::generate_compute(ctpipe::zb_h2(4, 8)), false, orders);
}

TEST_CASE("ZB-V p=4 m=8 matches the reference order, on V placement") {
  const char* const orders[4] = {
      "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 7I3 7W3 0F7 0I0 0W0 7F4 7I4 7W4 0I1 0W1 "
      "7F5 7I5 7W5 0I2 0W2 7F6 7I6 7W6 0I3 0W3 7F7 7I7 7W7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7",
      "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 6I2 6W2 1F6 1I0 1W0 6F4 6I3 6W3 1F7 1I1 1W1 6F5 6I4 "
      "6W4 1I2 1W2 6F6 6I5 6W5 1I3 1W3 6F7 6I6 6W6 1I4 6I7 1I5 1W4 1I6 1W5 1I7 1W6 6W7 1W7",
      "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 5I1 5W1 2F5 2I0 2W0 5F4 5I2 5W2 2F6 2I1 2W1 5F5 5I3 5W3 2F7 2I2 "
      "2W2 5F6 5I4 5W4 2I3 2W3 5F7 5I5 5W5 2I4 5I6 2I5 5I7 2I6 2W4 2I7 2W5 5W6 5W7 2W6 2W7",
      "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4I0 4W0 3F4 3I0 3W0 4F4 4I1 4W1 3F5 3I1 3W1 4F5 4I2 4W2 3F6 3I2 3W2 4F6 4I3 "
      "4W3 3F7 3I3 3W3 4F7 4I4 4W4 3I4 4I5 3I5 4I6 3I6 4I7 3I7 3W4 4W5 4W6 4W7 3W5 3W6 3W7"};
  const auto t = ctpipe::generate_compute(ctpipe::zb_v(4, 8));
  for (int s = 0; s < 8; ++s) CHECK(t.rank_of(s) == (s < 4 ? s : 7 - s));
  check_orders(t, true, orders);
  // The V turn (stages 3 and 4 on rank 3) hands over with no comm op.
  using ctpipe::op_kind;
  int comm = 0;
  const auto lowered = ctpipe::generate(ctpipe::zb_v(4, 8));  // (a named table: program() views into it)
  for (const auto& x : lowered.program(3)) {
    comm += ctpipe::is_comm(x.op);
    const bool turn = ((x.op == op_kind::send_forward || x.op == op_kind::recv_backward) && x.stage == 3) ||
                      ((x.op == op_kind::recv_forward || x.op == op_kind::send_backward) && x.stage == 4);
    CHECK(!turn);
  }
  CHECK(comm == 4 * 8);  // RECV_F of stage 3, SEND_F of stage 4, RECV_B of stage 4, SEND_B of stage 3
}

TEST_CASE("DualPipeV p=4 m=8 matches the reference order, with overlapped pairs") {
  const char* const orders[4] = {
      "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 (0F7&7B3) (7F4&0B0) 7B4 (7F5&0B1) 7B5 "
      "(7F6&0B2) 7B6 (7F7&0B3) 7B7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7",
      "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 (1F6&6B2) (6F4&1B0) (1F7&6B3) (6F5&1B1) 6B4 (6F6&1B2) "
      "6B5 (6F7&1B3) 6B6 1B4 6I7 1I5 6W7 1I6 1W5 1I7 1W6 1W7",
      "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 (2F5&5B1) (5F4&2B0) (2F6&5B2) (5F5&2B1) (2F7&5B3) (5F6&2B2) 5B4 "
      "(5F7&2B3) 5B5 2B4 5B6 2I5 5I7 2I6 2W5 2I7 5W7 2W6 2W7",
      "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 (4F4&3B0) (3F5&4B1) (4F5&3B1) (3F6&4B2) (4F6&3B2) (3F7&4B3) (4F7&3B3) "
      "4B4 3B4 4B5 3B5 4I6 3I6 4I7 3I7 4W6 3W6 4W7 3W7"};
  check_orders(ctpipe::generate_compute(ctpipe::dualpipe_v(4, 8)), true, orders);
  // Lowered, a pair stays one block: its receives before it, its sends after it.
  const auto t = ctpipe::generate(ctpipe::dualpipe_v(4, 8));
  for (int r = 0; r < 4; ++r) {
    const auto prog = t.program(r);
    for (std::size_t i = 0; i + 1 < prog.size(); ++i)
      if (prog[i].overlapped) CHECK(prog[i + 1].op == ctpipe::op_kind::backward);
  }
}

TEST_CASE("DualPipe p=4 m=8: two directions over mirrored stages, each rank in DualPipeV's phases") {
  // Stages 0-3 carry microbatches 0-3 down ranks 0-3; stages 4-7 (copies of stages 0-3) carry
  // microbatches 4-7 up ranks 3-0. Ranks 0 and 3 (h = 0), 1 and 2 (h = 1) of DualPipeV(2, 4).
  const char* const orders[4] = {"0F0 0F1 0F2 7F4 7I4 7W4 7F5 (0F3&7B5) (7F6&0B0) 7B6 (7F7&0B1) 7B7 0I2 0W2 0I3 0W3",
                                 "1F0 6F4 1F1 6F5 1F2 6B4 (6F6&1B0) (1F3&6B5) (6F7&1B1) 6B6 1B2 6I7 1I3 6W7 1W3",
                                 "5F4 2F0 5F5 2F1 5F6 2B0 (2F2&5B4) (5F7&2B1) (2F3&5B5) 2B2 5B6 2I3 5I7 2W3 5W7",
                                 "4F4 4F5 4F6 3F0 3I0 3W0 3F1 (4F7&3B1) (3F2&4B4) 3B2 (3F3&4B5) 3B3 4I6 4W6 4I7 4W7"};
  const auto t = ctpipe::generate_compute(ctpipe::dualpipe(4, 8));
  check_orders(t, true, orders);
  CHECK(t.params.directions == 2);
  for (int j = 0; j < 4; ++j) {
    CHECK(t.rank_of(j) == j);
    CHECK(t.rank_of(4 + j) == 3 - j);  // the second direction's stage j
  }
  CHECK(ctpipe::verify(ctpipe::lower(t)).ok());
}

TEST_CASE("DualPipe is DualPipeV with half the ranks and microbatches, per rank, for p <= 12, m <= 40") {
  int n = 0;
  for (int p = 2; p <= 12; p += 2)
    for (int m = 2 * p; m <= 40; m += 2) {
      const auto d = ctpipe::generate_compute(ctpipe::dualpipe(p, m));
      const auto v = ctpipe::generate_compute(ctpipe::dualpipe_v(p / 2, m / 2));
      for (int r = 0; r < p; ++r) {
        // Rank r is DualPipeV's rank h; its chunk 0 is the direction where it sits at stage h.
        const int h = r < p / 2 ? r : p - 1 - r;
        const int down = r, up = 2 * p - 1 - r;  // its stage in each direction
        const int c0 = r < p / 2 ? down : up, c1 = r < p / 2 ? up : down;
        auto mapped = [&](ctpipe::task x) {
          const int c = x.stage == h ? c0 : c1;
          x.stage = c;
          x.microbatch += c == up ? m / 2 : 0;
          return x;
        };
        const auto a = d.program(r), b = v.program(h);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == mapped(b[i]));
        ++n;
      }
    }
  MESSAGE("ranks compared: ", n);
}

TEST_CASE("looped BFS: all forwards chunk by chunk, then backwards in reverse") {
  const auto t = ctpipe::generate_compute(ctpipe::looped_bfs(2, 3, 2));
  CHECK(compute_order(t, 0, true) == "0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0");
  CHECK(compute_order(t, 1, true) == "1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0");
  CHECK(ctpipe::verify(ctpipe::lower(t)).ok());
}

TEST_CASE("interleaved zero bubble p=4 m=8 v=2: grouped order, I then W from step r on") {
  const auto t = ctpipe::generate_compute(ctpipe::interleaved_zero_bubble(4, 8, 2));
  // Rounds R = 2, M = 4; rank 3: warm-up (v-1)M = 4 forwards, W from step 3.
  CHECK(compute_order(t, 3, true) ==
        "3F0 3F1 3F2 3F3 7F0 7I0 7F1 7I1 7F2 7I2 7F3 7I3 7W0 3F4 3I0 7W1 3F5 3I1 7W2 3F6 3I2 7W3 3F7 3I3 3W0 "
        "7F4 7I4 3W1 7F5 7I5 3W2 7F6 7I6 3W3 7F7 7I7 7W4 3I4 7W5 3I5 7W6 3I6 7W7 3I7 3W4 3W5 3W6 3W7");
  CHECK(ctpipe::verify(ctpipe::lower(t)).ok());
}
