// static_assert(ctpipe::check<table>()): a table that breaks a rule does not compile, and the
// error names the rule (in the static_assert's words) with the rank, the position in that rank's
// program, and the op (in the template arguments of ctpipe::table_check_failed).
#pragma once

#include <ctpipe/analysis/verify.hpp>

namespace ctpipe {

/// Instantiated only when a check fails: read the rule below, the rank, position and op above.
template <check_rule Rule, int Rank, int Position, op_kind Op, int Stage, int Microbatch>
struct table_check_failed {
#define CTPIPE_CHECK_RULE(rule, text) static_assert(Rule != check_rule::rule, "ctpipe::check: " text);
  CTPIPE_CHECK_RULE(stage_out_of_range, "every task must name a stage that exists")
  CTPIPE_CHECK_RULE(microbatch_out_of_range, "every task must name a microbatch that exists")
  CTPIPE_CHECK_RULE(wrong_rank, "each op must run on the rank that holds its stage")
  CTPIPE_CHECK_RULE(duplicate_op, "every op must appear exactly once, and this one appears again")
  CTPIPE_CHECK_RULE(missing_op, "every compute op must appear exactly once, and this one is missing")
  CTPIPE_CHECK_RULE(mixed_backward, "a stage and microbatch must use either B, or I and W, never both")
  CTPIPE_CHECK_RULE(dependency_order, "an op must come after the ops of its own rank that it depends on")
  CTPIPE_CHECK_RULE(wrong_peer, "a send or receive must name the other rank that holds the neighbouring stage")
  CTPIPE_CHECK_RULE(missing_receive, "an op whose input is on another rank must be preceded by its receive")
  CTPIPE_CHECK_RULE(missing_send, "a value consumed on another rank must be sent after it is produced")
  CTPIPE_CHECK_RULE(
      unpaired_send_receive,
      "sends and receives must pair up in the same order between every two ranks (activations and gradients each)")
  CTPIPE_CHECK_RULE(deadlock, "the table must run to completion, and here every rank left waits on a receive")
#undef CTPIPE_CHECK_RULE
  static constexpr bool value = Rule == check_rule::ok;
};

/// True when the table `Table` follows every rule; fails to compile otherwise (see above).
template <auto Table>
consteval bool check() {
  constexpr verification v = verify(Table);
  if constexpr (v.ok()) {
    return true;
  } else {
    return table_check_failed<v.rule, v.rank, v.position, v.op.op, v.op.stage, v.op.microbatch>::value;
  }
}

namespace check_failed {
// Reached only in a failing constant evaluation of ctpipe::check(table): the function's name is
// the rule; clang's notes show the rank and position. check<table>() shows them on every compiler.
void stage_out_of_range(int rank, int position);
void microbatch_out_of_range(int rank, int position);
void wrong_rank(int rank, int position);
void duplicate_op(int rank, int position);
void missing_op(int rank, int position);
void mixed_backward(int rank, int position);
void dependency_order(int rank, int position);
void wrong_peer(int rank, int position);
void missing_receive(int rank, int position);
void missing_send(int rank, int position);
void unpaired_send_receive(int rank, int position);
void deadlock(int rank, int position);
}  // namespace check_failed

/// The function form: true when `t` follows every rule. At run time it returns false for a bad
/// table (use verify() for the details); in a constant expression a bad table stops compilation
/// at a function named after the broken rule.
template <table_like Table>
constexpr bool check(const Table& t) {
  const verification v = verify(t);
  if (std::is_constant_evaluated()) {
    switch (v.rule) {
      case check_rule::ok:
        break;
      case check_rule::stage_out_of_range:
        check_failed::stage_out_of_range(v.rank, v.position);
        break;
      case check_rule::microbatch_out_of_range:
        check_failed::microbatch_out_of_range(v.rank, v.position);
        break;
      case check_rule::wrong_rank:
        check_failed::wrong_rank(v.rank, v.position);
        break;
      case check_rule::duplicate_op:
        check_failed::duplicate_op(v.rank, v.position);
        break;
      case check_rule::missing_op:
        check_failed::missing_op(v.rank, v.position);
        break;
      case check_rule::mixed_backward:
        check_failed::mixed_backward(v.rank, v.position);
        break;
      case check_rule::dependency_order:
        check_failed::dependency_order(v.rank, v.position);
        break;
      case check_rule::wrong_peer:
        check_failed::wrong_peer(v.rank, v.position);
        break;
      case check_rule::missing_receive:
        check_failed::missing_receive(v.rank, v.position);
        break;
      case check_rule::missing_send:
        check_failed::missing_send(v.rank, v.position);
        break;
      case check_rule::unpaired_send_receive:
        check_failed::unpaired_send_receive(v.rank, v.position);
        break;
      case check_rule::deadlock:
        check_failed::deadlock(v.rank, v.position);
        break;
    }
  }
  return v.ok();
}

}  // namespace ctpipe
