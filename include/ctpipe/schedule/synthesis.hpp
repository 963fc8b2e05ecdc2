// Schedules synthesised from costs and a memory limit (split backward): a greedy scheduler run
// inside the compiler for the user's own per-stage F, I, W costs, message latency and activation
// limit, and by default the better of its order and the handcrafted ones that fit the same limit.
// One stage a rank: the Zero Bubble paper's scheduler (detail/synthesis_greedy.hpp) against 1F1B,
// ZB-H1 and ZB-H2. V placement (rank r holds stages r and 2p-1-r): the controllable-memory paper's
// (detail/synthesis_v.hpp) against ZB-V, V-Half and V-Min. The result is a schedule like any other:
// make_table proves it, every executor runs it.
//
//   constexpr auto s = ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(2, 3, 1, 1), 4);
//   constexpr auto table = ctpipe::make_table<s>();
//   constexpr auto r = s.report();   // the heuristic's own span beside the chosen order's
//   constexpr auto v = ctpipe::synthesise(4, 8, costs, 6, ctpipe::synthesis_placement::v);
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/classic.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/detail/synthesis_greedy.hpp>
#include <ctpipe/schedule/detail/synthesis_v.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>
#include <ctpipe/schedule/v_memory.hpp>
#include <ctpipe/schedule/v_shape.hpp>
#include <ctpipe/schedule/zero_bubble.hpp>

namespace ctpipe {

/// Where a synthesised schedule's order comes from.
enum class synthesis_source : int { heuristic, one_f_one_b, zb_h1, zb_h2, none, zb_v, v_half, v_min };

/// Which stages a rank holds: one (rank r: stage r), or two on V placement (r and 2p-1-r).
enum class synthesis_placement : int { one_stage, v };

/// What synthesis found: the heuristic's own span (the largest per-rank span, in the costs' unit;
/// -1 where no pass fit the limit) and peak, the order chosen, its span and peak (the most memory a
/// rank holds, in the limit's unit: activations of its stage by default), and the work of a rank
/// (m(F + I + W), the largest over stages) against which a bubble rate is (span - work) / span.
struct synthesis_report {
  long long heuristic_span = -1;
  int heuristic_peak = 0;
  synthesis_source chosen = synthesis_source::none;
  long long chosen_span = -1;
  int chosen_peak = 0;
  long long work = 0;
  constexpr double heuristic_bubble_rate() const {
    return heuristic_span > 0 ? static_cast<double>(heuristic_span - work) / static_cast<double>(heuristic_span) : 0.0;
  }
  constexpr double chosen_bubble_rate() const {
    return chosen_span > 0 ? static_cast<double>(chosen_span - work) / static_cast<double>(chosen_span) : 0.0;
  }
};

namespace detail {

// An order collected per rank (kind F, B, I or W; stage; microbatch), `per_rank` stages a rank:
// one (rank r: stage r) or two on V placement; for a heuristic's order also its own span and peak.
struct collected_order {
  int p = 0, m = 0, per_rank = 1;
  buffer<int> kind, stage, microbatch, length;
  long long span = -1;
  int peak = 0;
  bool ok = false;
  constexpr collected_order(int ranks, int microbatches, int stages_a_rank)
      : p(ranks),
        m(microbatches),
        per_rank(stages_a_rank),
        kind(static_cast<std::size_t>(ranks) * 3 * stages_a_rank * microbatches),
        stage(static_cast<std::size_t>(ranks) * 3 * stages_a_rank * microbatches),
        microbatch(static_cast<std::size_t>(ranks) * 3 * stages_a_rank * microbatches),
        length(static_cast<std::size_t>(ranks)) {}
  constexpr std::size_t at(int rank, int k) const {
    return static_cast<std::size_t>(rank) * 3 * per_rank * m + static_cast<std::size_t>(k);
  }
  constexpr int rank_of(int s) const { return per_rank == 2 ? v_rank_of(p, s) : s; }
  constexpr void push(int rank, task t) {
    const std::size_t slot = at(rank, length.data()[rank]++);
    kind.data()[slot] = static_cast<int>(t.op);
    stage.data()[slot] = t.stage;
    microbatch.data()[slot] = t.microbatch;
  }
};

// Times an order under `c` as the heuristics do (each op as early as its rank and its input allow,
// a message between ranks costing c.comm; a full B costs I + W): the largest span (from a rank's
// first op to its last), and the peak memory (the costs' memory_of; a full B frees what its I and
// W would); span -1 where the order cannot run.
struct replayed {
  long long span = -1;
  int peak = 0;
};
constexpr replayed replay(const collected_order& o, const synthesis_costs& c) {
  const int p = o.p, m = o.m, stages = p * o.per_rank;
  buffer<long long> f_end(static_cast<std::size_t>(stages) * m, -1), i_end(static_cast<std::size_t>(stages) * m, -1);
  buffer<long long> free_at(static_cast<std::size_t>(p)), first(static_cast<std::size_t>(p), -1);
  buffer<int> next(static_cast<std::size_t>(p)), live(static_cast<std::size_t>(p));
  replayed r{0, 0};
  for (bool progress = true; progress;) {
    progress = false;
    for (int j = 0; j < p; ++j)
      while (next.data()[j] < o.length.data()[j]) {
        const std::size_t at = o.at(j, next.data()[j]);
        const auto k = static_cast<op_kind>(o.kind.data()[at]);
        const int s = o.stage.data()[at], mb = o.microbatch.data()[at];
        const op_costs& cost_of = c.stage[s];
        long long ready = free_at.data()[j];
        const int from = k == op_kind::forward && s > 0                                               ? s - 1
                         : (k == op_kind::backward_input || k == op_kind::backward) && s + 1 < stages ? s + 1
                                                                                                      : -1;
        if (from >= 0) {
          const long long e = (k == op_kind::forward ? f_end : i_end).data()[from * m + mb];
          if (e < 0) break;
          const long long arrives = e + (o.rank_of(from) == j ? 0 : c.comm);
          ready = arrives > ready ? arrives : ready;
        }
        const long long cost = k == op_kind::forward          ? cost_of.forward
                               : k == op_kind::backward_input ? cost_of.input
                               : k == op_kind::backward       ? cost_of.input + cost_of.weight
                                                              : cost_of.weight;
        if (first.data()[j] < 0) first.data()[j] = ready;
        free_at.data()[j] = ready + cost;
        if (k == op_kind::forward) f_end.data()[s * m + mb] = ready + cost;
        if (k == op_kind::backward_input || k == op_kind::backward) i_end.data()[s * m + mb] = ready + cost;
        live.data()[j] += k == op_kind::forward           ? c.memory_of(syn_f)
                          : k == op_kind::backward_input  ? c.memory_of(syn_i)
                          : k == op_kind::backward_weight ? c.memory_of(syn_w)
                                                          : -c.activation;
        r.peak = live.data()[j] > r.peak ? live.data()[j] : r.peak;
        ++next.data()[j];
        progress = true;
      }
  }
  for (int j = 0; j < p; ++j) {
    if (next.data()[j] < o.length.data()[j]) return {};
    const long long span = free_at.data()[j] - first.data()[j];
    r.span = span > r.span ? span : r.span;
  }
  return r;
}

template <class S>
constexpr replayed replay_schedule(const S& s, const synthesis_costs& c) {
  collected_order o(s.info().ranks, s.info().microbatches, s.info().chunks);
  s.emit(o);
  return replay(o, c);
}

// The heuristic's order for a placement, collected per rank, with its own span and peak (`ok`
// false where it found none).
inline constexpr op_kind syn_op[3] = {op_kind::forward, op_kind::backward_input, op_kind::backward_weight};
constexpr collected_order find_one_stage(int p, int m, const synthesis_costs& c, int limit) {
  const greedy_order g = greedy_schedule(p, m, c, limit);
  collected_order h(p, m, 1);
  h.span = g.span;
  h.ok = g.ok;
  for (int j = 0; j < p && g.ok; ++j)
    for (int k = 0, live = 0; k < 3 * m; ++k) {
      const std::size_t at = static_cast<std::size_t>(j) * 3 * m + k;
      h.push(j, make_compute(syn_op[g.kind.data()[at]], j, g.microbatch.data()[at]));
      live += c.memory_of(g.kind.data()[at]);
      h.peak = live > h.peak ? live : h.peak;
    }
  return h;
}

constexpr collected_order find_v(int p, int m, const synthesis_costs& c, int limit) {
  const v_greedy_order g = v_greedy_schedule(p, m, c, limit);
  collected_order h(p, m, 2);
  h.span = g.span;
  h.peak = g.peak;
  h.ok = g.ok;
  for (int r = 0; r < p && g.ok; ++r)
    for (int k = 0; k < 6 * m; ++k) {
      const std::size_t at = static_cast<std::size_t>(r) * 6 * m + k;
      h.push(r, make_compute(syn_op[g.kind.data()[at]], g.stage.data()[at], g.microbatch.data()[at]));
    }
  return h;
}

}  // namespace detail

/// A schedule synthesised for per-stage costs and a memory limit (what a rank may hold, in the
/// unit of the costs' `activation` and `weight_stash`: by default a microbatch's activations of one
/// stage, of which 1F1B needs p, ZB-H2 2p - 1, and on V placement ZB-V 2p, V-Half 2((p+2)/2)).
/// Split backward; one stage a rank, or two on V placement (costs.stage[s] for stage s < 2p).
/// `heuristic_only`: the heuristic's own order even where a handcrafted one is faster.
struct synthesised_schedule {
  int ranks = 1, microbatches = 1;
  synthesis_costs costs{};
  int memory_limit = 1;
  bool heuristic_only = false;
  synthesis_placement placement = synthesis_placement::one_stage;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::synthesise")
  constexpr bool on_v() const { return placement == synthesis_placement::v; }
  constexpr schedule_info info() const { return {"synthesised", ranks, microbatches, on_v() ? 2 : 1, 0}; }
  constexpr int rank_of(int stage) const {
    return on_v() ? detail::v_rank_of(ranks, stage) : detail::loop_rank_of(ranks, stage);
  }
  constexpr int stages() const { return on_v() ? 2 * ranks : ranks; }
  constexpr int program_length() const { return (on_v() ? 6 : 3) * microbatches; }  // F, I and W of its stages
  constexpr param_check validate() const {
    if (stages() > synthesis_costs::max_stages) return {param_rule::ranks_within_synthesis, ranks};
    if (costs.activation < 1 || costs.weight_stash < 0 || costs.weight_stash > costs.activation)
      return {param_rule::memory_units, costs.activation < 1 ? costs.activation : costs.weight_stash};
    if (memory_limit < costs.activation) return {param_rule::memory_limit_at_least_one, memory_limit};
    if (on_v() && memory_limit < 2 * costs.activation) return {param_rule::memory_limit_holds_v_turn, memory_limit};
    if (costs.comm < 0) return {param_rule::costs_positive, costs.comm};
    for (int j = 0; j < stages() && j < synthesis_costs::max_stages; ++j) {
      const op_costs& s = costs.stage[j];
      const int least = s.forward < s.input ? (s.forward < s.weight ? s.forward : s.weight)
                                            : (s.input < s.weight ? s.input : s.weight);
      if (least < 1) return {param_rule::costs_positive, least};
    }
    // (One stage a rank, the heuristic always finds an order; on V placement it may not.)
    if (on_v() && report().chosen == synthesis_source::none) return {param_rule::synthesis_fits, memory_limit};
    return {};
  }

  /// What synthesis found (the heuristic's figure and the order chosen).
  constexpr synthesis_report report() const { return report(find()); }

  template <class Sink>
  constexpr void emit(Sink& out) const {
    const detail::collected_order h = find();
    const synthesis_source chosen = report(h).chosen;
    if (chosen == synthesis_source::one_f_one_b) return one_f_one_b(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::zb_h1) return zb_h1(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::zb_h2) return zb_h2(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::zb_v) return zb_v(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::v_half) return v_half(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::v_min) return v_min(ranks, microbatches).emit(out);
    if (chosen != synthesis_source::heuristic) return;  // nothing fits: an empty table fails its proof
    for (int r = 0; r < ranks; ++r)
      for (int k = 0; k < h.length.data()[r]; ++k) {
        const std::size_t at = h.at(r, k);
        out.push(r, make_compute(static_cast<op_kind>(h.kind.data()[at]), h.stage.data()[at], h.microbatch.data()[at]));
      }
  }

 private:
  constexpr detail::collected_order find() const {
    // (Not a conditional expression: g++ 12 destroys its class-type result twice when constant.)
    if (on_v()) return detail::find_v(ranks, microbatches, costs, memory_limit);
    return detail::find_one_stage(ranks, microbatches, costs, memory_limit);
  }
  constexpr synthesis_report report(const detail::collected_order& h) const {
    synthesis_report r{};
    for (int j = 0; j < ranks; ++j) {
      const op_costs& s = costs.stage[j];
      long long w = static_cast<long long>(microbatches) * (s.forward + s.input + s.weight);
      if (on_v()) {
        const op_costs& t = costs.stage[2 * ranks - 1 - j];
        w += static_cast<long long>(microbatches) * (t.forward + t.input + t.weight);
      }
      r.work = w > r.work ? w : r.work;
    }
    if (h.ok) {
      r.heuristic_span = h.span;
      r.heuristic_peak = h.peak;
      r.chosen = synthesis_source::heuristic;
      r.chosen_span = h.span;
      r.chosen_peak = h.peak;
    }
    if (heuristic_only) return r;
    auto consider = [&](synthesis_source source, const detail::replayed& x) {
      if (x.span < 0 || x.peak > memory_limit) return;
      if (r.chosen_span < 0 || x.span < r.chosen_span) {
        r.chosen = source;
        r.chosen_span = x.span;
        r.chosen_peak = x.peak;
      }
    };
    if (on_v()) {
      consider(synthesis_source::zb_v, detail::replay_schedule(zb_v(ranks, microbatches), costs));
      consider(synthesis_source::v_half, detail::replay_schedule(v_half(ranks, microbatches), costs));
      consider(synthesis_source::v_min, detail::replay_schedule(v_min(ranks, microbatches), costs));
      return r;
    }
    consider(synthesis_source::one_f_one_b, detail::replay_schedule(one_f_one_b(ranks, microbatches), costs));
    consider(synthesis_source::zb_h1, detail::replay_schedule(zb_h1(ranks, microbatches), costs));
    consider(synthesis_source::zb_h2, detail::replay_schedule(zb_h2(ranks, microbatches), costs));
    return r;
  }

 public:
  friend constexpr bool operator==(const synthesised_schedule&, const synthesised_schedule&) = default;
};

/// The schedule for `ranks` ranks (one stage each, or two on V placement) and `microbatches`,
/// under per-stage `costs` and a limit of `memory_limit` a rank (activations of a stage, or the
/// unit of the costs' `activation`): the better of the heuristic's order and the handcrafted ones
/// that fit.
constexpr synthesised_schedule synthesise(int ranks, int microbatches, const synthesis_costs& costs, int memory_limit,
                                          synthesis_placement placement = synthesis_placement::one_stage) {
  return {ranks, microbatches, costs, memory_limit, false, placement};
}
/// The heuristic's own order, whatever the handcrafted ones would do.
constexpr synthesised_schedule synthesise_heuristic(int ranks, int microbatches, const synthesis_costs& costs,
                                                    int memory_limit,
                                                    synthesis_placement placement = synthesis_placement::one_stage) {
  return {ranks, microbatches, costs, memory_limit, true, placement};
}

}  // namespace ctpipe
