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
#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

namespace detail {
// Where each stage's values come from and go to: the rank of the stage before it in its chain
// (-1 at the chain's start: no message) and of the stage after it (-1 at the chain's end). An op
// on a rank that does not hold its stage (which verification reports) gets messages only from
// and to its neighbours' ranks, never from its own stage's. An F receives from `before` and
// sends to `after`, a B or I the other way round, a W neither. (Looked up through plain pointers
// in the loop below: each call and each std::array index costs a constant evaluation several
// steps, and g++ time and memory, per task.)
struct stage_neighbours {
  buffer<int> before, after;

  template <table_like Table>
  constexpr stage_neighbours(const Table& t, const stage_chains& chains)
      : before(static_cast<std::size_t>(t.stages())), after(static_cast<std::size_t>(t.stages())) {
    for (int s = 0; s < t.stages(); ++s) {
      before[static_cast<std::size_t>(s)] = chains.first(s) ? -1 : t.rank_of(s - 1);
      after[static_cast<std::size_t>(s)] = chains.last(s) ? -1 : t.rank_of(s + 1);
    }
  }
};

// The skip messages of compute op `x` (F, B or I) on rank `r`: its receives (`in`) or its sends, in
// the order of the crossings. F before it and B after it: the crossings that end at its stage
// (the far end is where they start); F after it and B before it: those that start there.
template <table_like Table, class Sink>
constexpr void push_skip_messages(const Table& t, std::span<const crossing> cs, const stage_chains& chains, int r,
                                  const task& x, bool in, Sink& out) {
  const bool fwd = x.op == op_kind::forward;
  const int a = chains.model_stage(x.stage), base = x.stage - a;
  const bool ends_here = fwd == in;
  const op_kind k = fwd ? (in ? op_kind::recv_skip_forward : op_kind::send_skip_forward)
                        : (in ? op_kind::recv_skip_backward : op_kind::send_skip_backward);
  for (const crossing& c : cs) {
    if (!crossing_in_range(c, chains.length) || (ends_here ? c.to : c.from) != a) continue;
    const int far = base + (ends_here ? c.from : c.to);
    const int peer = t.rank_of(far);
    if (peer != r) out.push(r, task{k, x.stage, x.microbatch, peer, false, far});
  }
}

// The message of a neighbour's value for compute op `x` (F, B or I): its receive (`in`) from
// `peer`, or its send to `peer`.
constexpr task neighbour_message(const task& x, bool in, int peer) {
  const bool fwd = x.op == op_kind::forward;
  return {fwd ? (in ? op_kind::recv_forward : op_kind::send_forward)
              : (in ? op_kind::recv_backward : op_kind::send_backward),
          x.stage, x.microbatch, peer};
}

// An overlapped pair F&B (`x`, then `y`) on rank `r`: the receives of both halves, both ops, the
// sends of both.
template <table_like Table, class Sink>
constexpr void lay_pair(const Table& t, std::span<const crossing> cs, const stage_chains& chains,
                        const stage_neighbours& nb, int r, const task& x, const task& y, Sink& out) {
  const task* half[2] = {&x, &y};
  for (const task* h : half) {
    const bool fwd = h->op == op_kind::forward, bwd = input_backward_op[static_cast<int>(h->op)];
    const int from = fwd ? nb.before[static_cast<std::size_t>(h->stage)] : nb.after[static_cast<std::size_t>(h->stage)];
    if ((fwd || bwd) && from >= 0 && from != r) out.push(r, neighbour_message(*h, true, from));
    if (fwd || bwd) push_skip_messages(t, cs, chains, r, *h, true, out);
  }
  out.push(r, x);
  out.push(r, y);
  for (const task* h : half) {
    const bool fwd = h->op == op_kind::forward, bwd = input_backward_op[static_cast<int>(h->op)];
    const int to = fwd ? nb.after[static_cast<std::size_t>(h->stage)] : nb.before[static_cast<std::size_t>(h->stage)];
    if ((fwd || bwd) && to >= 0 && to != r) out.push(r, neighbour_message(*h, false, to));
    if (fwd || bwd) push_skip_messages(t, cs, chains, r, *h, false, out);
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
  const detail::stage_neighbours nb(t, chains);
  const int* before = nb.before.data();
  const int* after = nb.after.data();
  for (int r = 0; r < t.ranks(); ++r) {
    const auto prog = t.program(r);
    const task* x = prog.data();
    for (const task* end = x + prog.size(); x != end; ++x) {
      if (detail::comm_op[static_cast<int>(x->op)]) continue;
      if (x->stage < 0 || x->stage >= stages) {
        out.push(r, *x);
        continue;
      }
      // The pair's second half: the next compute op, if this one opens an overlapped pair. (A flag,
      // not a null test of the pointer: g++ 12 with -fsanitize=undefined does not take comparing
      // an address in a template argument object with null as a constant expression.)
      bool paired = false;
      const task* second = x;
      if (x->overlapped) {
        const task* y = x + 1;
        while (y != end && detail::comm_op[static_cast<int>(y->op)]) ++y;
        paired = y != end && y->stage >= 0 && y->stage < stages;
        second = paired ? y : x;
      }
      if (paired) {
        detail::lay_pair(t, cs, chains, nb, r, *x, *second, out);
        x = second;
        continue;
      }
      // One op: its receive, its skip receives, the op, its send, its skip sends. (Straight-line
      // code over a copy of the task, its messages built in place rather than by neighbour_message:
      // in a constant evaluation each call, statement, loop iteration and read through the pointer
      // costs g++ time and memory, per task; the call alone 1.07x the lowering's.)
      const task y = *x;
      const bool fwd = y.op == op_kind::forward, bwd = detail::input_backward_op[static_cast<int>(y.op)];
      const int from = fwd ? before[y.stage] : after[y.stage], to = fwd ? after[y.stage] : before[y.stage];
      if ((fwd || bwd) && from >= 0 && from != r)
        out.push(r, task{fwd ? op_kind::recv_forward : op_kind::recv_backward, y.stage, y.microbatch, from});
      if ((fwd || bwd) && !cs.empty()) detail::push_skip_messages(t, cs, chains, r, y, true, out);
      out.push(r, y);
      if ((fwd || bwd) && to >= 0 && to != r)
        out.push(r, task{fwd ? op_kind::send_forward : op_kind::send_backward, y.stage, y.microbatch, to});
      if ((fwd || bwd) && !cs.empty()) detail::push_skip_messages(t, cs, chains, r, y, false, out);
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
  detail::fill_programs(t, [](auto& sink) { lower(Table, std::span<const crossing>(Crossings), sink); });
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
