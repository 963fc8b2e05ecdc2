// Every verification rule: a table that breaks it is reported with the rule, the rank and the position.
#include <doctest/doctest.h>

#include "support/test_util.hpp"

using ctpipe::check_rule;
using ctpipe::op_kind;

namespace {
void expect(const ctpipe::verification& v, check_rule rule, int rank, int position) {
  CHECK_MESSAGE(v.rule == rule, ctpipe::message(v));
  CHECK(v.rank == rank);
  CHECK(v.position == position);
}
ctpipe::verification verify_csv(const std::string& csv) { return ctpipe::verify(test::from_csv(csv)); }
}  // namespace

TEST_CASE("stage and microbatch out of range") {
  ctpipe::dynamic_table t(ctpipe::custom_schedule(1, 1), {0});
  t.push(0, {op_kind::forward, 0, 0, -1});
  t.push(0, {op_kind::backward, 3, 0, -1});
  expect(ctpipe::verify(t), check_rule::stage_out_of_range, 0, 1);
  t.programs[0][1] = {op_kind::backward, 0, 7, -1};
  expect(ctpipe::verify(t), check_rule::microbatch_out_of_range, 0, 1);
}

TEST_CASE("each op on the rank that holds its stage") {
  expect(verify_csv("0F0,0B0\n0F1,0B1\n"), check_rule::wrong_rank, 1, 0);
}

TEST_CASE("every compute op exactly once") {
  expect(verify_csv("0F0,0F0,0B0\n"), check_rule::duplicate_op, 0, 1);
  const auto v = verify_csv("0F0,0F1,0B0\n");
  expect(v, check_rule::missing_op, 0, -1);
  CHECK(v.op == ctpipe::task{op_kind::backward, 0, 1, -1});
  CHECK(ctpipe::message(v) ==
        "rank 0, missing (B stage 0 mb 1): every compute op must appear exactly once, and this one is missing");
  expect(verify_csv("0F0,0B0,0I0,0W0\n"), check_rule::mixed_backward, 0, 2);
  expect(verify_csv("0F0,0I0\n"), check_rule::missing_op, 0, -1);
}

TEST_CASE("dependencies respected in program order") {
  expect(verify_csv("0B0,0F0\n"), check_rule::dependency_order, 0, 0);
  expect(verify_csv("0F0,0W0,0I0\n"), check_rule::dependency_order, 0, 1);
  // Two stages on one rank: stage 1's forward before stage 0's.
  ctpipe::dynamic_table t(ctpipe::custom_schedule(1, 1), {0, 0});
  for (auto x : {ctpipe::task{op_kind::forward, 1, 0, -1},
                 {op_kind::forward, 0, 0, -1},
                 {op_kind::backward, 1, 0, -1},
                 {op_kind::backward, 0, 0, -1}})
    t.push(0, x);
  expect(ctpipe::verify(t), check_rule::dependency_order, 0, 0);
}

TEST_CASE("two directions: a microbatch keeps to its direction's stages, and no value crosses") {
  // DualPipe p=2 m=4: microbatches 0-1 on stages 0-1, microbatches 2-3 on stages 2-3.
  auto t = ctpipe::generate(ctpipe::dualpipe(2, 4));
  REQUIRE(ctpipe::verify(t).ok());
  REQUIRE(t.programs[0][0] == ctpipe::task{op_kind::forward, 0, 0, -1});
  t.programs[0][0].microbatch = 2;  // 0F0 -> 0F2: stage 0 runs only the first direction's microbatches
  expect(ctpipe::verify(t), check_rule::wrong_direction, 0, 0);
  // One stage per direction on two ranks: a send from the end of one chain into the other.
  ctpipe::dynamic_table u(ctpipe::custom_schedule(2, 2, 1, 2), {0, 1});
  for (auto x :
       {ctpipe::task{op_kind::forward, 0, 0, -1}, {op_kind::send_forward, 0, 0, 1}, {op_kind::backward, 0, 0, -1}})
    u.push(0, x);
  for (auto x : {ctpipe::task{op_kind::forward, 1, 1, -1}, {op_kind::backward, 1, 1, -1}}) u.push(1, x);
  expect(ctpipe::verify(u), check_rule::wrong_direction, 0, 1);
  u.programs[0].erase(u.programs[0].begin() + 1);
  CHECK(ctpipe::verify(u).ok());  // two independent one-stage pipelines
  // Directions that do not divide the microbatches.
  ctpipe::dynamic_table w(ctpipe::custom_schedule(2, 3, 1, 2), {0, 1});
  expect(ctpipe::verify(w), check_rule::wrong_direction, 0, -1);
}

TEST_CASE("sends and receives where values cross ranks") {
  expect(verify_csv("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n"), check_rule::missing_receive, 1, 0);
  expect(verify_csv("0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"), check_rule::missing_send, 0, 0);
  ctpipe::dynamic_table t = ctpipe::generate(ctpipe::gpipe(2, 1));
  t.programs[0][1].peer = 0;  // SEND_F to itself
  expect(ctpipe::verify(t), check_rule::wrong_peer, 0, 1);
}

TEST_CASE("sends and receives pair up in the same order") {
  expect(verify_csv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                    "1RECV_F1,1F1,1RECV_F0,1F0,1B0,1SEND_B0,1B1,1SEND_B1\n"),
         check_rule::unpaired_send_receive, 1, 2);
}

TEST_CASE("no deadlock under blocking receives") {
  const auto v = verify_csv("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  expect(v, check_rule::deadlock, 0, 1);
  CHECK(ctpipe::message(v) ==
        "rank 0, position 1 (RECV_B stage 0 mb 0 from rank 1): the table must run to completion, and here every rank "
        "left waits on a receive");
}

TEST_CASE("run-time entry points throw verification_error naming the rule, rank and position") {
  const auto bad = test::from_csv("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CHECK_THROWS_WITH_AS(ctpipe::require_verified(bad),
                       doctest::Contains("ctpipe::check: rank 0, position 1 (RECV_B stage 0 mb 0 from rank 1)"),
                       ctpipe::verification_error);
  // analyse() and simulate() without a callback find a deadlock in their own run of the table
  // (verification leaves it to them), plan_memory() in verification's: the same rule, rank and
  // position.
  const auto deadlock = doctest::Contains(
      "ctpipe::check: rank 0, position 1 (RECV_B stage 0 mb 0 from rank 1): the "
      "table must run to completion");
  CHECK_THROWS_WITH_AS((void)ctpipe::analyse(bad), deadlock, ctpipe::verification_error);
  CHECK_THROWS_WITH_AS((void)ctpipe::simulate(bad), deadlock, ctpipe::verification_error);
  CHECK_THROWS_WITH_AS((void)ctpipe::plan_memory(bad), deadlock, ctpipe::verification_error);
  // Given a callback, simulate() proves every rule first: the callback never sees a bad table.
  int calls = 0;
  CHECK_THROWS_WITH_AS((void)ctpipe::simulate(bad, ctpipe::cost_model{}, [&](int, int, double, double) { ++calls; }),
                       deadlock, ctpipe::verification_error);
  CHECK(calls == 0);
  CHECK_FALSE(ctpipe::check(bad));
  CHECK(ctpipe::check(ctpipe::generate(ctpipe::gpipe(3, 2))));
}

TEST_CASE("a generated table with any single op moved out of place is caught") {
  // Swap every pair of adjacent ops on one rank of 1F1B p=3 m=4: each result is either the same
  // dependencies (still valid) or breaks a rule; never a crash or a hang.
  const auto good = ctpipe::generate(ctpipe::one_f_one_b(3, 4));
  int broken = 0;
  for (int r = 0; r < good.ranks(); ++r)
    for (std::size_t i = 0; i + 1 < good.programs[static_cast<std::size_t>(r)].size(); ++i) {
      auto t = good;
      std::swap(t.programs[static_cast<std::size_t>(r)][i], t.programs[static_cast<std::size_t>(r)][i + 1]);
      broken += !ctpipe::verify(t).ok();
    }
  CHECK(broken > 30);
}

// A forward-only table (schedule_info::forward_only): F ops and their messages, under the rules of
// the forward alone.
TEST_CASE("a forward-only table runs F ops alone, each after its input, and sends no gradient") {
  const auto forward_only = [](const std::string& csv) {
    ctpipe::dynamic_table t = test::from_csv(csv);
    t.params.forward_only = true;
    return ctpipe::verify(t);
  };
  CHECK(forward_only("0F0,0SEND_F0,0F1,0SEND_F1\n1RECV_F0,1F0,1RECV_F1,1F1\n").ok());
  // The same table without the flag is missing its backward. (Read from CSV, a table without a
  // backward op is taken for a forward-only one: the flag is cleared by hand.)
  ctpipe::dynamic_table plain = test::from_csv("0F0,0SEND_F0,0F1,0SEND_F1\n1RECV_F0,1F0,1RECV_F1,1F1\n");
  CHECK(plain.params.forward_only);
  plain.params.forward_only = false;
  expect(ctpipe::verify(plain), check_rule::missing_op, 0, -1);
  const auto v = forward_only("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  expect(v, check_rule::backward_in_forward_only, 0, 2);
  CHECK(ctpipe::message(v) ==
        "rank 0, position 2 (RECV_B stage 0 mb 0 from rank 1): a forward-only table (schedule_info::forward_only) "
        "runs no B, I or W and sends no gradients");
  expect(forward_only("0F0,0F1\n1RECV_F0,1F0,1RECV_F1,1F1\n"), check_rule::missing_send, 0, 0);
  expect(forward_only("0F0,0SEND_F0,0F1,0SEND_F1\n1F0,1RECV_F0,1RECV_F1,1F1\n"), check_rule::missing_receive, 1, 0);
  expect(forward_only("0F0,0SEND_F0,0F1,0SEND_F1\n1RECV_F0,1F0,1RECV_F1\n"), check_rule::missing_op, 1, -1);
  // Two stages on one rank: stage 1's F before stage 0's.
  ctpipe::dynamic_table t(ctpipe::custom_schedule(1, 1), {0, 0});
  t.params.forward_only = true;
  t.push(0, {op_kind::forward, 1, 0, -1});
  t.push(0, {op_kind::forward, 0, 0, -1});
  expect(ctpipe::verify(t), check_rule::dependency_order, 0, 0);
  // forward_table: a training table's F ops, in its order, with their messages.
  const auto f = ctpipe::forward_table(ctpipe::generate(ctpipe::one_f_one_b(2, 2)));
  CHECK(f.params.forward_only);
  CHECK(ctpipe::same_programs(f, test::from_csv("0F0,0SEND_F0,0F1,0SEND_F1\n1RECV_F0,1F0,1RECV_F1,1F1\n")));
}
