// static_assert(ctpipe::check<table>()): a table that breaks a rule does not compile, and the
// error names the rule (in the static_assert's words) with the rank, the position in that rank's
// program, and the op (in the template arguments of ctpipe::table_check_failed).
#pragma once

#include <ctpipe/analysis/verify.hpp>

namespace ctpipe {

/// Instantiated only when a check fails: read the rule below, the rank, position and op above.
template <check_rule Rule, int Rank, int Position, op_kind Op, int Stage, int Microbatch>
struct table_check_failed {
#define CTPIPE_DETAIL_RULE_ASSERT(rule, words) static_assert(Rule != check_rule::rule, "ctpipe::check: " words);
  CTPIPE_CHECK_RULES(CTPIPE_DETAIL_RULE_ASSERT)
#undef CTPIPE_DETAIL_RULE_ASSERT
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

/// The function form: true when `t` follows every rule. At run time it returns false for a bad
/// table (use verify() for the details); in a constant expression a bad table stops compilation
/// at a function named after the broken rule (ctpipe::detail::check_failed::<rule>).
template <table_like Table>
constexpr bool check(const Table& t) {
  const verification v = verify(t);
  detail::stop_constant_evaluation(v);
  return v.ok();
}

}  // namespace ctpipe
