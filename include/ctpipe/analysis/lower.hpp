// Lowering: lay the sends and receives of every cross-rank edge into a table of compute ops.
//
// A receive goes just before the first op that consumes it (not as early as possible: posting
// early blocks the rank on a value it does not need yet); a send goes right after the op that
// produces the value. Adjacent stages on the same rank pass values without comm ops.
#pragma once

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// Writes `t`'s compute ops with their sends and receives into `out`. Comm ops already in `t` are
/// dropped and laid anew, so lowering a lowered table gives the same table. Tasks that name a
/// stage outside the table are passed through untouched (verification reports them).
template <table_like Table, class Sink>
constexpr void lower(const Table& t, Sink& out) {
  const int stages = t.stages();
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const task* x = prog.data();
    for (const task* end = x + prog.size(); x != end; ++x) {
      if (detail::comm_op[static_cast<int>(x->op)]) continue;
      if (x->stage < 0 || x->stage >= stages) {
        out.push(r, *x);
        continue;
      }
      // Which neighbour this op takes a value from (before it) and gives one to (after it).
      const bool fwd = x->op == op_kind::forward;
      const bool bwd = x->op == op_kind::backward || x->op == op_kind::backward_input;
      const int prev = x->stage > 0 ? t.rank_of(x->stage - 1) : r;
      const int next = x->stage + 1 < stages ? t.rank_of(x->stage + 1) : r;
      const int from = fwd ? prev : bwd ? next : r;
      const int to = fwd ? next : bwd ? prev : r;
      if (from != r)
        out.push(r, task{fwd ? op_kind::recv_forward : op_kind::recv_backward, x->stage, x->microbatch, from});
      out.push(r, *x);
      if (to != r) out.push(r, task{fwd ? op_kind::send_forward : op_kind::send_backward, x->stage, x->microbatch, to});
    }
  }
}

namespace detail {
template <auto Compute>
consteval int lowered_capacity() {
  length_counter<CTPIPE_NTTP_TYPE(Compute)::static_ranks> c{};
  lower(Compute, c);
  return c.max();
}
}  // namespace detail

/// Compile time: `Table` (a task_table, with or without comm ops) lowered anew, in a table sized to fit.
template <auto Table>
consteval auto make_lowered_table() {
  constexpr int cap = detail::lowered_capacity<Table>();
  task_table<CTPIPE_NTTP_TYPE(Table)::static_ranks, CTPIPE_NTTP_TYPE(Table)::static_stages,
             static_cast<std::size_t>(cap)>
      t{};
  t.params = Table.params;
  t.stage_rank = Table.stage_rank;
  lower(Table, t);
  return t;
}

/// Run time: the lowered table of a compute table.
template <table_like Table>
dynamic_table lower(const Table& t) {
  std::vector<int> placement(static_cast<std::size_t>(t.stages()));
  for (int s = 0; s < t.stages(); ++s) placement[static_cast<std::size_t>(s)] = t.rank_of(s);
  schedule p{schedule_kind::custom, t.ranks(), t.microbatches(), 1, 0};
  if constexpr (requires { t.params; }) p = t.params;
  dynamic_table out(p, std::move(placement));
  lower(t, out);
  return out;
}

}  // namespace ctpipe
