// The executor plan: the lowered table plus, for every task, the compile-time constants its call
// site needs (which buffer slot, which message on which channel). Computed once by a consteval
// function; shared by the executors. Plain constexpr: no threads, no Hana.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/analysis/check.hpp>
#include <ctpipe/analysis/lower.hpp>

namespace ctpipe {

/// What a task needs besides its op, stage, microbatch and peer. -1 where not used.
struct task_slots {
  int stash = -1;      // F, B, SEND_F: the stage's stash slot for this microbatch
  int local_in = -1;   // F: slot of the input handed over by stage - 1 on the same rank;
                       // B: slot of the output gradient handed over by stage + 1 on the same rank
  int local_out = -1;  // F: slot to hand the output to stage + 1 on the same rank;
                       // B: slot to hand the input gradient to stage - 1 on the same rank
  int message = -1;    // comm ops: ordinal of this message on its boundary's channel;
                       // F, B: ordinal of the message they consume (received just before)
  constexpr bool operator==(const task_slots&) const = default;
};

/// How an executor expands a rank's program into code. Both keep every task's op and stage (so its
/// stage's tensor types and the layers it calls) a compile-time constant at its call site, and both
/// inline the task's code; they differ in where a task's microbatch and slots live. Measured side by
/// side in bench/README.md (time per task, code size, compile time).
enum class dispatch : std::uint8_t {
  /// One call per task, in order, with every argument a constant: straight-line code, no loop and
  /// no branch between tasks. Code grows with the table (about 30 bytes a near-empty task).
  unrolled,
  /// A loop over the rank's program as a constexpr array: each entry picks one of the rank's few
  /// (op, stage) branches, all inlined, and carries the microbatch and slots as data. Code grows
  /// with the number of (op, stage) kinds on a rank, not with the table.
  table_walk,
  /// unrolled where every rank's program has at most `automatic_unroll_limit` tasks, else
  /// table_walk: beyond that, unrolling costs compile time (g++ 12: 14 s at 1,024 tasks a rank, over
  /// 3 minutes at 4,096) for a fraction of a nanosecond a task.
  automatic,
};
inline constexpr int automatic_unroll_limit = 1024;

/// What a task's code reads besides its op and stage: its microbatch and buffer slots. An executor
/// passes these either as constants (fixed_task_args, unrolled) or as data (table_walk).
struct task_args {
  int microbatch = 0;
  int stash = -1, local_in = -1, local_out = -1, message = -1;  // as in task_slots
  constexpr bool operator==(const task_args&) const = default;
};
/// task_args as compile-time constants: static members with the same names.
template <task_args A>
struct fixed_task_args {
  static constexpr int microbatch = A.microbatch, stash = A.stash, local_in = A.local_in, local_out = A.local_out,
                       message = A.message;
};

constexpr task_args args_of(const task& t, const task_slots& x) {
  return {t.microbatch, x.stash, x.local_in, x.local_out, x.message};
}

/// Which code a task runs: its op on its stage. The table walk branches on this.
struct task_code {
  op_kind op{};
  int stage = 0;
  constexpr bool operator==(const task_code&) const = default;
};
struct walk_entry {
  int code = 0;  // index into program_walk::codes
  task_args args{};
};
/// One rank's program as data for the table-walk strategy: the distinct codes of its tasks, and
/// per task (in program order) the index of its code and its arguments.
template <std::size_t Codes, std::size_t Length>
struct program_walk {
  std::array<task_code, Codes> codes{};
  std::array<walk_entry, Length> entries{};
};

namespace detail {
template <auto Plan, int R>
consteval std::size_t code_count() {
  constexpr auto& prog = Plan.table.programs[static_cast<std::size_t>(R)];
  std::size_t n = 0;
  for (int i = 0; i < Plan.table.length[static_cast<std::size_t>(R)]; ++i) {
    bool seen = false;
    for (int j = 0; j < i && !seen; ++j)
      seen = prog[static_cast<std::size_t>(j)].op == prog[static_cast<std::size_t>(i)].op &&
             prog[static_cast<std::size_t>(j)].stage == prog[static_cast<std::size_t>(i)].stage;
    n += seen ? 0 : 1;
  }
  return n;
}
}  // namespace detail

/// Rank R's program of an execution plan, as a table walk (codes in order of first use).
template <auto Plan, int R>
consteval auto make_program_walk() {
  constexpr auto r = static_cast<std::size_t>(R);
  constexpr auto length = static_cast<std::size_t>(Plan.table.length[r]);
  program_walk<detail::code_count<Plan, R>(), length> w{};
  std::size_t codes = 0;
  for (std::size_t i = 0; i < length; ++i) {
    const task& t = Plan.table.programs[r][i];
    const task_code c{t.op, t.stage};
    std::size_t k = 0;
    while (k < codes && !(w.codes[k] == c)) ++k;
    if (k == codes) w.codes[codes++] = c;
    w.entries[i] = {static_cast<int>(k), args_of(t, Plan.slots[r][i])};
  }
  return w;
}

/// The lowered table and the slots of every task. Boundary b joins stage b and stage b + 1;
/// activations cross it forwards, gradients backwards.
template <std::size_t Ranks, std::size_t Stages, std::size_t Capacity>
struct execution_plan {
  task_table<Ranks, Stages, Capacity> table{};
  std::array<std::array<task_slots, Capacity>, Ranks> slots{};
  std::array<int, Stages> stash_slots{};           // stash buffers per stage (liveness: F .. B)
  std::array<int, Stages> local_forward_slots{};   // same-rank hand-off buffers, boundary b forwards
  std::array<int, Stages> local_backward_slots{};  // same-rank hand-off buffers, boundary b backwards
  std::array<int, Stages> channel_capacity{};      // cross-rank boundary b: messages in flight at most
  std::array<bool, Stages> backward_in_order{};    // stage s runs its backward ops in microbatch order
  bool split_backward = false;                     // the table has I or W ops
};

namespace detail {

// Slot pools, one per stage or boundary, each handing slots out last-freed-first, so that a pool's
// size is its peak number of live buffers.
struct slot_pools {
  buffer<int> free_list, free_count, used;
  std::size_t per = 0;
  constexpr slot_pools(std::size_t pools, std::size_t most)
      : free_list(pools * (most + 1)), free_count(pools), used(pools), per(most + 1) {}
  constexpr int take(int pool) {
    int& f = free_count.data()[pool];
    return f > 0 ? free_list.data()[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(--f)]
                 : used.data()[pool]++;
  }
  constexpr void give(int pool, int slot) {
    free_list.data()[static_cast<std::size_t>(pool) * per + static_cast<std::size_t>(free_count.data()[pool]++)] = slot;
  }
};

}  // namespace detail

/// Plans the execution of `Table` (a compute table or a lowered one; it is lowered anew so that
/// every receive sits just before its consumer and every send just after its producer).
/// `Table` must verify: use static_assert(ctpipe::check<Table>()) to see why one does not.
template <auto Table>
consteval auto make_execution_plan() {
  constexpr auto t = make_lowered_table<Table>();
  static_assert(check<t>(), "ctpipe::make_execution_plan: the table does not verify (see the error above)");
  constexpr std::size_t R = CTPIPE_NTTP_TYPE(t)::static_ranks, S = CTPIPE_NTTP_TYPE(t)::static_stages, C = CTPIPE_NTTP_TYPE(t)::capacity;
  execution_plan<R, S, C> plan{};
  plan.table = t;
  const auto m = static_cast<std::size_t>(t.microbatches());
  const auto mem = plan_memory(t);  // verifies, and gives each rank pair's channel capacity
  for (std::size_t b = 0; b + 1 < S; ++b) {
    const int a = t.stage_rank[b], c = t.stage_rank[b + 1];
    const int f = a == c ? 0 : mem.capacity(a, c), g = a == c ? 0 : mem.capacity(c, a);
    plan.channel_capacity[b] = f > g ? f : g;
  }
  for (std::size_t s = 0; s < S; ++s) plan.backward_in_order[s] = true;
  std::array<int, S> last_backward{};
  last_backward.fill(-1);
  // Per (stage or boundary, microbatch): the slot or message ordinal it holds.
  detail::buffer<int> stash(S * m), lf(S * m), lb(S * m), recv_f_at(S * m), recv_b_at(S * m);
  const auto key = [&](int s, int mb) { return static_cast<std::size_t>(s) * m + static_cast<std::size_t>(mb); };
  for (std::size_t r = 0; r < R; ++r) {
    // A stage's stash, and each boundary's same-rank hand-off, live on one rank: pools per rank.
    detail::slot_pools stash_pool(S, m), lf_pool(S, m), lb_pool(S, m);
    std::array<int, S> sent_f{}, sent_b{}, recv_f{}, recv_b{};
    for (int i = 0; i < t.length[r]; ++i) {
      const task x = t.programs[r][static_cast<std::size_t>(i)];
      task_slots& ts = plan.slots[r][static_cast<std::size_t>(i)];
      const int s = x.stage, mb = x.microbatch;
      const bool has_prev = s > 0, has_next = s + 1 < static_cast<int>(S);
      const bool local_prev = has_prev && t.stage_rank[static_cast<std::size_t>(s - 1)] == static_cast<int>(r);
      const bool local_next = has_next && t.stage_rank[static_cast<std::size_t>(s + 1)] == static_cast<int>(r);
      switch (x.op) {
        case op_kind::forward:
          ts.stash = stash.data()[key(s, mb)] = stash_pool.take(s);
          if (local_prev)
            lf_pool.give(s - 1, ts.local_in = lf.data()[key(s - 1, mb)]);
          else if (has_prev)
            ts.message = recv_f_at.data()[key(s, mb)];
          if (local_next) ts.local_out = lf.data()[key(s, mb)] = lf_pool.take(s);
          break;
        case op_kind::backward:
        case op_kind::backward_input:
        case op_kind::backward_weight:
          if (x.op != op_kind::backward) plan.split_backward = true;
          if (mb < last_backward[static_cast<std::size_t>(s)])
            plan.backward_in_order[static_cast<std::size_t>(s)] = false;
          last_backward[static_cast<std::size_t>(s)] = mb;
          ts.stash = stash.data()[key(s, mb)];
          if (local_next)
            lb_pool.give(s, ts.local_in = lb.data()[key(s, mb)]);
          else if (has_next)
            ts.message = recv_b_at.data()[key(s, mb)];
          if (local_prev) ts.local_out = lb.data()[key(s - 1, mb)] = lb_pool.take(s - 1);
          if (x.op != op_kind::backward_input) stash_pool.give(s, ts.stash);
          break;
        case op_kind::send_forward: {
          ts.stash = stash.data()[key(s, mb)];
          ts.message = sent_f[static_cast<std::size_t>(s)]++;
          break;
        }
        case op_kind::recv_forward:
          ts.message = recv_f_at.data()[key(s, mb)] = recv_f[static_cast<std::size_t>(s - 1)]++;
          break;
        case op_kind::send_backward:
          ts.message = sent_b[static_cast<std::size_t>(s - 1)]++;
          break;
        case op_kind::recv_backward:
          ts.message = recv_b_at.data()[key(s, mb)] = recv_b[static_cast<std::size_t>(s)]++;
          break;
      }
    }
    for (std::size_t s = 0; s < S; ++s) {
      if (t.stage_rank[s] != static_cast<int>(r)) continue;
      plan.stash_slots[s] = stash_pool.used.data()[s];
      plan.local_forward_slots[s] = lf_pool.used.data()[s];
      if (s > 0) plan.local_backward_slots[s - 1] = lb_pool.used.data()[s - 1];
    }
  }
  return plan;
}

}  // namespace ctpipe
