// The executor plan: the lowered table plus, for every task, the compile-time constants its call
// site needs (which buffer slot, which message on which channel). Computed once by a consteval
// function; shared by the executors. Plain constexpr: no threads, no Hana.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <ctpipe/analysis/analyse.hpp>
#include <ctpipe/analysis/check.hpp>
#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/slot_pools.hpp>

namespace ctpipe {

/// What a task needs besides its op, stage, microbatch and peer. -1 where not used.
struct task_slots {
  int stash = -1;      // F, B, I, W, SEND_F: the stage's stash slot for this microbatch (F to B, or F to W)
  int local_in = -1;   // F: slot of the input handed over by stage - 1 on the same rank;
                       // B, I: slot of the output gradient handed over by stage + 1 on the same rank
  int local_out = -1;  // F: slot to hand the output to stage + 1 on the same rank;
                       // B, I: slot to hand the input gradient to stage - 1 on the same rank
  int message = -1;    // comm ops: ordinal of this message on its boundary's channel;
                       // F, B, I: ordinal of the message they consume (received just before)
  constexpr bool operator==(const task_slots&) const = default;
};

/// How the messages of one crossing (a skip connection from stage `from` to stage `to`) travel:
/// through a channel of `capacity` messages each way between the two ranks (`remote`), or, where
/// both stages are on one rank, through `value_slots` and `gradient_slots` buffers on it.
struct skip_route {
  int from = 0, to = 0;
  bool remote = false;
  int capacity = 0;
  int value_slots = 0, gradient_slots = 0;
  int values = 0, gradients = 0;  // remote: the messages a step carries each way
  constexpr bool operator==(const skip_route&) const = default;
};

/// The lowered table and the slots of every task. Boundary b joins stage b and stage b + 1;
/// activations cross it forwards, gradients backwards. A table with crossings (Crossings of them)
/// also routes their messages: per (crossing k, microbatch i) at k x microbatches + i, the ordinal
/// of the value's message on its channel (remote) or its buffer slot (one rank), and likewise for
/// the gradient.
template <std::size_t Ranks, std::size_t Stages, std::size_t Capacity, std::size_t Crossings = 0,
          std::size_t SkipEntries = 0>
struct execution_plan {
  task_table<Ranks, Stages, Capacity, Crossings> table{};
  std::array<std::array<task_slots, Capacity>, Ranks> slots{};
  std::array<int, Stages> stash_slots{};           // stash buffers per stage (liveness: F .. B)
  std::array<int, Stages> local_forward_slots{};   // same-rank hand-off buffers, boundary b forwards
  std::array<int, Stages> local_backward_slots{};  // same-rank hand-off buffers, boundary b backwards
  std::array<int, Stages> channel_capacity{};      // cross-rank boundary b: messages in flight at most
  std::array<int, Stages> forward_messages{};      // cross-rank boundary b: activations a step carries
  std::array<int, Stages> backward_messages{};     // and gradients
  std::array<bool, Stages> backward_in_order{};    // stage s runs its B/I ops, and its B/W ops, in microbatch order
  int chain_length = static_cast<int>(Stages);     // stages per chain (stage_chains): half of them for dualpipe
  bool split_backward = false;                     // the table has I or W ops
  bool forward_only = false;                       // a forward-only table (evaluation): F ops alone
  std::array<skip_route, Crossings> skips{};
  std::array<int, SkipEntries> skip_value_at{};
  std::array<int, SkipEntries> skip_gradient_at{};
};

/// Plans the execution of `Table` (a compute table or a lowered one; it is lowered anew so that
/// every receive sits just before its consumer and every send just after its producer).
/// `Table` must verify: use static_assert(ctpipe::check<Table>()) to see why one does not.
///
/// A forward-only table frees a stage's stash slot as early as its readers allow. On the host
/// (InPlace false) an F hands its output to a stage on the same rank through a hand-off slot, so
/// the slot lives for the F alone, or until its SEND_F. Where the next stage's F and a skip
/// connection's consumer on the same rank read the producer's slot in place, and every send copies
/// out of it (the device executors: InPlace true), the slot lives until the last of those readers.
template <auto Table, bool InPlace = false>
consteval auto make_execution_plan() {
  constexpr auto t = make_lowered_table<Table>();
  static_assert(check<t>(), "ctpipe::make_execution_plan: the table does not verify (see the error above)");
  constexpr std::size_t R = CTPIPE_NTTP_TYPE(t)::static_ranks, S = CTPIPE_NTTP_TYPE(t)::static_stages,
                        C = CTPIPE_NTTP_TYPE(t)::capacity, K = t.crossings.size(),
                        KM = K * static_cast<std::size_t>(t.microbatches());
  execution_plan<R, S, C, K, KM> plan{};
  plan.table = t;
  plan.forward_only = forward_only_of(t);
  const stage_chains chains = chains_of(t);
  plan.chain_length = chains.length;
  const auto m = static_cast<std::size_t>(t.microbatches());
  const auto mem = plan_memory(t);  // verifies, and gives each rank pair's channel capacity
  for (std::size_t b = 0; b + 1 < S; ++b) {
    if (chains.last(static_cast<int>(b))) continue;  // the end of one chain, not a boundary
    const int a = t.stage_rank[b], c = t.stage_rank[b + 1];
    const int f = a == c ? 0 : mem.capacity(a, c), g = a == c ? 0 : mem.capacity(c, a);
    plan.channel_capacity[b] = f > g ? f : g;
  }
  // (Counts as int: nvcc warns of an unsigned compared with a zero K.)
  const int crossings = static_cast<int>(K);
  for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k) {
    const crossing& c = t.crossings[k];
    const int a = t.stage_rank[static_cast<std::size_t>(c.from)], b = t.stage_rank[static_cast<std::size_t>(c.to)];
    const int f = a == b ? 0 : mem.capacity(a, b), g = a == b ? 0 : mem.capacity(b, a);
    plan.skips[k] = {c.from, c.to, a != b, f > g ? f : g, 0, 0, 0, 0};
  }
  // The crossing from stage `from` to stage `to` (each pair is listed once).
  const auto crossing_of = [&](int from, int to) {
    std::size_t k = 0;
    while (static_cast<int>(k) < crossings && !(t.crossings[k].from == from && t.crossings[k].to == to)) ++k;
    return k;
  };
  const auto skip_key = [&](std::size_t k, int mb) { return k * m + static_cast<std::size_t>(mb); };
  std::array<int, K> sent_sf{}, sent_sb{}, recv_sf{}, recv_sb{};
  for (std::size_t s = 0; s < S; ++s) plan.backward_in_order[s] = true;
  // Per stage, the microbatch of the last op that consumed a gradient (B or I) and of the last one
  // that accumulated weight gradients (B or W): each sequence must rise for a deterministic step.
  std::array<int, S> last_input{}, last_weight{};
  last_input.fill(-1);
  last_weight.fill(-1);
  // Per (stage or boundary, microbatch): the slot or message ordinal it holds.
  detail::buffer<int> stash(S * m), lf(S * m), lb(S * m), recv_f_at(S * m), recv_b_at(S * m);
  // Forward only, InPlace: per (stage, microbatch), the readers of its stash slot still to come.
  detail::buffer<int> readers(S * m);
  const auto key = [&](int s, int mb) { return static_cast<std::size_t>(s) * m + static_cast<std::size_t>(mb); };
  for (std::size_t r = 0; r < R; ++r) {
    // A stage's stash, and each boundary's same-rank hand-off, live on one rank: pools per rank.
    detail::slot_pools stash_pool(S, m), lf_pool(S, m), lb_pool(S, m), sv_pool(K, m), sg_pool(K, m);
    // The crossings of a compute op of stage s on this rank whose two stages are both here: what
    // its F (value) or its B or I (gradient) hands over through a buffer, or takes from one.
    const auto local_skips = [&](int s, int mb, bool fwd) {
      for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k) {
        const skip_route& route = plan.skips[k];
        if (route.remote || t.stage_rank[static_cast<std::size_t>(route.from)] != static_cast<int>(r)) continue;
        int* at = fwd ? plan.skip_value_at.data() : plan.skip_gradient_at.data();
        detail::slot_pools& pool = fwd ? sv_pool : sg_pool;
        const bool takes = fwd ? route.from == s : route.to == s, gives = fwd ? route.to == s : route.from == s;
        if (takes) at[skip_key(k, mb)] = pool.take(static_cast<int>(k));
        if (gives) pool.give(static_cast<int>(k), at[skip_key(k, mb)]);
      }
    };
    // Forward only, InPlace: one reader of stage s's slot for microbatch mb is done (an F reading
    // it in place, or a send copying out of it); the last one frees it.
    const auto read_in_place = [&](int s, int mb) {
      if (--readers.data()[key(s, mb)] == 0) stash_pool.give(s, stash.data()[key(s, mb)]);
    };
    std::array<int, S> sent_f{}, sent_b{}, recv_f{}, recv_b{};
    for (int i = 0; i < t.length[r]; ++i) {
      const task x = t.programs[r][static_cast<std::size_t>(i)];
      task_slots& ts = plan.slots[r][static_cast<std::size_t>(i)];
      const int s = x.stage, mb = x.microbatch;
      const bool has_prev = !chains.first(s), has_next = !chains.last(s);
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
          local_skips(s, mb, true);
          // Forward only: nothing is kept for a backward; the slot lives until its SEND_F has
          // sent from it, or only for the F (InPlace: until its last reader).
          if (plan.forward_only && !InPlace && (local_next || !has_next)) stash_pool.give(s, ts.stash);
          if (plan.forward_only && InPlace) {
            int& n = readers.data()[key(s, mb)];
            n = has_next ? 1 : 0;
            for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k) n += plan.skips[k].from == s ? 1 : 0;
            if (n == 0) stash_pool.give(s, ts.stash);
            if (local_prev) read_in_place(s - 1, mb);
            for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
              if (plan.skips[k].to == s && !plan.skips[k].remote) read_in_place(plan.skips[k].from, mb);
          }
          break;
        case op_kind::backward_weight:  // W: its stash slot (activations and gradients), freed after it
          plan.split_backward = true;
          if (mb < last_weight[static_cast<std::size_t>(s)])
            plan.backward_in_order[static_cast<std::size_t>(s)] = false;
          last_weight[static_cast<std::size_t>(s)] = mb;
          ts.stash = stash.data()[key(s, mb)];
          stash_pool.give(s, ts.stash);
          break;
        case op_kind::backward:
        case op_kind::backward_input:
          if (x.op == op_kind::backward_input) plan.split_backward = true;
          if (mb < last_input[static_cast<std::size_t>(s)] ||
              (x.op == op_kind::backward && mb < last_weight[static_cast<std::size_t>(s)]))
            plan.backward_in_order[static_cast<std::size_t>(s)] = false;
          last_input[static_cast<std::size_t>(s)] = mb;
          if (x.op == op_kind::backward) last_weight[static_cast<std::size_t>(s)] = mb;
          ts.stash = stash.data()[key(s, mb)];
          if (local_next)
            lb_pool.give(s, ts.local_in = lb.data()[key(s, mb)]);
          else if (has_next)
            ts.message = recv_b_at.data()[key(s, mb)];
          if (local_prev) ts.local_out = lb.data()[key(s - 1, mb)] = lb_pool.take(s - 1);
          if (x.op == op_kind::backward) stash_pool.give(s, ts.stash);  // I keeps it for its W
          local_skips(s, mb, false);
          break;
        case op_kind::send_forward: {
          ts.stash = stash.data()[key(s, mb)];
          ts.message = sent_f[static_cast<std::size_t>(s)]++;
          if (plan.forward_only && !InPlace) stash_pool.give(s, ts.stash);
          if (plan.forward_only && InPlace) read_in_place(s, mb);
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
        // A skip message's ordinal on its crossing's channel; the consumer (F of `to`, B or I of
        // `from`) finds it by microbatch.
        case op_kind::send_skip_forward:
          ts.message = sent_sf[crossing_of(s, x.other)]++;
          if (plan.forward_only && InPlace) read_in_place(s, mb);
          break;
        case op_kind::recv_skip_forward: {
          const std::size_t k = crossing_of(x.other, s);
          ts.message = plan.skip_value_at[skip_key(k, mb)] = recv_sf[k]++;
          break;
        }
        case op_kind::send_skip_backward:
          ts.message = sent_sb[crossing_of(x.other, s)]++;
          break;
        case op_kind::recv_skip_backward: {
          const std::size_t k = crossing_of(s, x.other);
          ts.message = plan.skip_gradient_at[skip_key(k, mb)] = recv_sb[k]++;
          break;
        }
      }
    }
    for (std::size_t s = 0; s < S; ++s) {  // (what rank r receives: a step's messages per boundary)
      plan.forward_messages[s] += recv_f[s];
      plan.backward_messages[s] += recv_b[s];
    }
    for (std::size_t s = 0; s < S; ++s) {
      if (t.stage_rank[s] != static_cast<int>(r)) continue;
      plan.stash_slots[s] = stash_pool.used(static_cast<int>(s));
      plan.local_forward_slots[s] = lf_pool.used(static_cast<int>(s));
      if (s > 0) plan.local_backward_slots[s - 1] = lb_pool.used(static_cast<int>(s) - 1);
    }
    for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
      if (!plan.skips[k].remote && t.stage_rank[static_cast<std::size_t>(plan.skips[k].from)] == static_cast<int>(r)) {
        plan.skips[k].value_slots = sv_pool.used(static_cast<int>(k));
        plan.skips[k].gradient_slots = sg_pool.used(static_cast<int>(k));
      }
  }
  for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
    if (plan.skips[k].remote) {
      plan.skips[k].values = recv_sf[k];
      plan.skips[k].gradients = recv_sb[k];
    }
  return plan;
}

}  // namespace ctpipe
