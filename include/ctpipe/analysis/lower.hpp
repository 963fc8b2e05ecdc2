// Lowering: lay the sends and receives of every cross-rank edge into a table of compute ops.
//
// A receive goes just before the first op that consumes it (not as early as possible: posting
// early blocks the rank on a value it does not need yet); a send goes right after the op that
// produces the value. Adjacent stages on the same rank pass values without comm ops. A crossing
// (a skip connection from stage a to stage b, crossing.hpp) whose stages lie on different ranks
// gets messages of its own, straight between the two: after a's F a SEND_SKIP_F, before b's F its
// RECV_SKIP_F; after b's B (or I) a SEND_SKIP_B, before a's B (or I) its RECV_SKIP_B. Before an op
// its neighbour's receive comes first, then the skip receives in the order of the crossings; after
// it, likewise for the sends.
#pragma once

#include <array>
#include <span>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

namespace detail {
// The neighbours a compute op takes its input from (before it) and gives its output to (after it):
// the ranks of the stages before and after in its chain, for F and for B or I; itself for W or at
// either end of the chain.
struct op_neighbours {
  int from, to;
  op_kind recv, send;
};
template <table_like Table>
constexpr op_neighbours neighbours_of(const Table& t, const stage_chains& chains, int r, const task& x) {
  const bool fwd = x.op == op_kind::forward;
  const bool bwd = x.op == op_kind::backward || x.op == op_kind::backward_input;
  const int prev = chains.first(x.stage) ? r : t.rank_of(x.stage - 1);
  const int next = chains.last(x.stage) ? r : t.rank_of(x.stage + 1);
  return {fwd   ? prev
          : bwd ? next
                : r,
          fwd   ? next
          : bwd ? prev
                : r,
          fwd ? op_kind::recv_forward : op_kind::recv_backward, fwd ? op_kind::send_forward : op_kind::send_backward};
}

// The skip messages of compute op `x` on rank `r`: its receives (`before` it) or its sends (after).
// An F receives what earlier stages made for it and sends what later ones read; a B or I receives
// the gradients of what it sent and sends the gradients of what it received; a W has none.
template <table_like Table, class Sink>
constexpr void push_skip_messages(const Table& t, std::span<const crossing> cs, const stage_chains& chains, int r,
                                  const task& x, bool before, Sink& out) {
  const bool fwd = x.op == op_kind::forward;
  if (cs.empty() || !(fwd || x.op == op_kind::backward || x.op == op_kind::backward_input)) return;
  const int a = chains.model_stage(x.stage), base = x.stage - a;
  // F before it and B after it: the crossings that end at a (the far end is where they start).
  const bool ends_here = fwd == before;
  const op_kind k = fwd ? (before ? op_kind::recv_skip_forward : op_kind::send_skip_forward)
                        : (before ? op_kind::recv_skip_backward : op_kind::send_skip_backward);
  for (const crossing& c : cs) {
    if (!crossing_in_range(c, chains.length) || (ends_here ? c.to : c.from) != a) continue;
    const int far = base + (ends_here ? c.from : c.to);
    const int peer = t.rank_of(far);
    if (peer != r) out.push(r, task{k, x.stage, x.microbatch, peer, false, far});
  }
}
}  // namespace detail

/// Writes `t`'s compute ops with their sends and receives into `out`, with the skip messages of the
/// crossings `cs`. Comm ops already in `t` are dropped and laid anew, so lowering a lowered table
/// gives the same table. Tasks that name a stage outside the table are passed through untouched
/// (verification reports them). An overlapped pair F&B (an overlapped F and the compute op after
/// it) stays one block: the receives of both halves before it, the sends of both after it.
template <table_like Table, class Sink>
requires table_sink<Sink>
constexpr void lower(const Table& t, std::span<const crossing> cs, Sink& out) {
  const int stages = t.stages();
  const stage_chains chains = chains_of(t);
  auto in_range = [&](const task& x) { return x.stage >= 0 && x.stage < stages; };
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const task* x = prog.data();
    for (const task* end = x + prog.size(); x != end; ++x) {
      if (detail::comm_op[static_cast<int>(x->op)]) continue;
      if (!in_range(*x)) {
        out.push(r, *x);
        continue;
      }
      // The pair's second half: the next compute op, if this one opens an overlapped pair. (A flag,
      // not a null test of the pointer: g++ 12 with -fsanitize=undefined does not take comparing
      // an address in a template argument object with null as a constant expression.)
      const task* second = x;
      bool paired = false;
      if (x->overlapped) {
        const task* y = x + 1;
        while (y != end && detail::comm_op[static_cast<int>(y->op)]) ++y;
        paired = y != end && in_range(*y);
        second = paired ? y : x;
      }
      const auto a = detail::neighbours_of(t, chains, r, *x);
      if (a.from != r) out.push(r, task{a.recv, x->stage, x->microbatch, a.from});
      detail::push_skip_messages(t, cs, chains, r, *x, true, out);
      if (paired) {
        const auto b = detail::neighbours_of(t, chains, r, *second);
        if (b.from != r) out.push(r, task{b.recv, second->stage, second->microbatch, b.from});
        detail::push_skip_messages(t, cs, chains, r, *second, true, out);
        out.push(r, *x);
        out.push(r, *second);
        if (a.to != r) out.push(r, task{a.send, x->stage, x->microbatch, a.to});
        detail::push_skip_messages(t, cs, chains, r, *x, false, out);
        if (b.to != r) out.push(r, task{b.send, second->stage, second->microbatch, b.to});
        detail::push_skip_messages(t, cs, chains, r, *second, false, out);
        x = second;
        continue;
      }
      out.push(r, *x);
      if (a.to != r) out.push(r, task{a.send, x->stage, x->microbatch, a.to});
      detail::push_skip_messages(t, cs, chains, r, *x, false, out);
    }
  }
}

/// Lowers `t` with the crossings it lists.
template <table_like Table, class Sink>
requires table_sink<Sink>
constexpr void lower(const Table& t, Sink& out) { lower(t, crossings_of(t), out); }

namespace detail {
// The crossings a table type lists (a std::array; none for a type without them).
template <auto Table>
consteval auto listed_crossings() {
  if constexpr (requires { Table.crossings; })
    return Table.crossings;
  else
    return std::array<crossing, 0>{};
}

template <auto Compute, auto Crossings>
consteval int lowered_capacity() {
  length_counter<CTPIPE_NTTP_TYPE(Compute)::static_ranks> c{};
  lower(Compute, std::span<const crossing>(Crossings), c);
  return c.max();
}
}  // namespace detail

/// Compile time: `Table` (a task_table, with or without comm ops) lowered anew, in a table sized to
/// fit, with the skip messages of `Crossings` (a std::array<ctpipe::crossing, K>; by default the
/// crossings `Table` lists), which the lowered table lists.
template <auto Table, auto Crossings = detail::listed_crossings<Table>()>
consteval auto make_lowered_table() {
  constexpr int cap = detail::lowered_capacity<Table, Crossings>();
  task_table<CTPIPE_NTTP_TYPE(Table)::static_ranks, CTPIPE_NTTP_TYPE(Table)::static_stages,
             static_cast<std::size_t>(cap), Crossings.size()>
      t{};
  t.params = Table.params;
  t.stage_rank = Table.stage_rank;
  t.crossings = Crossings;
  lower(Table, std::span<const crossing>(Crossings), t);
  return t;
}

/// Run time: the lowered table of a compute table, with the skip messages of the crossings `cs`.
template <table_like Table>
dynamic_table lower(const Table& t, std::span<const crossing> cs) {
  std::vector<int> placement(static_cast<std::size_t>(t.stages()));
  for (int s = 0; s < t.stages(); ++s) placement[static_cast<std::size_t>(s)] = t.rank_of(s);
  schedule_info p = custom_schedule(t.ranks(), t.microbatches());
  if constexpr (requires { t.params; }) p = t.params;
  dynamic_table out(p, std::move(placement));
  out.crossings.assign(cs.begin(), cs.end());
  lower(t, cs, out);
  return out;
}

/// Run time: the lowered table of a compute table, with the crossings it lists.
template <table_like Table>
dynamic_table lower(const Table& t) {
  return lower(t, crossings_of(t));
}

}  // namespace ctpipe
