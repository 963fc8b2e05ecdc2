// Schedules synthesised from costs and a memory limit (one stage a rank, split backward): the Zero
// Bubble paper's automatic scheduler (detail/synthesis_greedy.hpp) run inside the compiler for the
// user's own per-stage F, I, W costs, message latency and activation limit, and by default the
// better of its order and the handcrafted ones (1F1B, ZB-H1, ZB-H2) that fit the same limit. The
// result is a schedule like any other: make_table proves it, every executor runs it.
//
//   constexpr auto s = ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(2, 3, 1, 1), 4);
//   constexpr auto table = ctpipe::make_table<s>();
//   constexpr auto r = s.report();   // the heuristic's own span beside the chosen order's
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/classic.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/detail/synthesis_greedy.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>
#include <ctpipe/schedule/zero_bubble.hpp>

namespace ctpipe {

/// Where a synthesised schedule's order comes from.
enum class synthesis_source : int { heuristic, one_f_one_b, zb_h1, zb_h2, none };

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

// A handcrafted order collected per rank (one stage a rank: kind F, B, I or W and microbatch).
struct collected_order {
  int p = 0, m = 0;
  buffer<int> kind, microbatch, length;
  constexpr collected_order(int ranks, int microbatches)
      : p(ranks),
        m(microbatches),
        kind(static_cast<std::size_t>(ranks) * 3 * microbatches),
        microbatch(static_cast<std::size_t>(ranks) * 3 * microbatches),
        length(static_cast<std::size_t>(ranks)) {}
  constexpr void push(int rank, task t) {
    const std::size_t at = static_cast<std::size_t>(rank) * 3 * m + length.data()[rank]++;
    kind.data()[at] = static_cast<int>(t.op);
    microbatch.data()[at] = t.microbatch;
  }
};

// Times an order of one stage a rank under `c` as the heuristic does (each op as early as its
// rank and its input allow; a full B costs I + W): the largest span, and the peak memory (the
// costs' memory_of; a full B frees what its I and W would); span -1 where the order cannot run.
struct replayed {
  long long span = -1;
  int peak = 0;
};
constexpr replayed replay(const collected_order& o, const synthesis_costs& c) {
  const int p = o.p, m = o.m;
  buffer<long long> f_end(static_cast<std::size_t>(p) * m, -1), i_end(static_cast<std::size_t>(p) * m, -1);
  buffer<long long> free_at(static_cast<std::size_t>(p)), first(static_cast<std::size_t>(p), -1);
  buffer<int> next(static_cast<std::size_t>(p)), live(static_cast<std::size_t>(p));
  replayed r{0, 0};
  for (bool progress = true; progress;) {
    progress = false;
    for (int j = 0; j < p; ++j)
      while (next.data()[j] < o.length.data()[j]) {
        const std::size_t at = static_cast<std::size_t>(j) * 3 * m + next.data()[j];
        const auto k = static_cast<op_kind>(o.kind.data()[at]);
        const int mb = o.microbatch.data()[at];
        const op_costs& s = c.stage[j];
        long long ready = free_at.data()[j];
        if (k == op_kind::forward && j > 0) {
          const long long e = f_end.data()[(j - 1) * m + mb];
          if (e < 0) break;
          ready = e + c.comm > ready ? e + c.comm : ready;
        }
        if ((k == op_kind::backward_input || k == op_kind::backward) && j + 1 < p) {
          const long long e = i_end.data()[(j + 1) * m + mb];
          if (e < 0) break;
          ready = e + c.comm > ready ? e + c.comm : ready;
        }
        const long long cost = k == op_kind::forward          ? s.forward
                               : k == op_kind::backward_input ? s.input
                               : k == op_kind::backward       ? s.input + s.weight
                                                              : s.weight;
        if (first.data()[j] < 0) first.data()[j] = ready;
        free_at.data()[j] = ready + cost;
        if (k == op_kind::forward) f_end.data()[j * m + mb] = ready + cost;
        if (k == op_kind::backward_input || k == op_kind::backward) i_end.data()[j * m + mb] = ready + cost;
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
  collected_order o(s.info().ranks, s.info().microbatches);
  s.emit(o);
  return replay(o, c);
}

constexpr int greedy_peak(const greedy_order& g, const synthesis_costs& c) {
  int peak = 0;
  for (int j = 0; j < g.p; ++j)
    for (int k = 0, live = 0; k < 3 * g.m; ++k) {
      live += c.memory_of(g.kind.data()[static_cast<std::size_t>(j) * 3 * g.m + k]);
      peak = live > peak ? live : peak;
    }
  return peak;
}

}  // namespace detail

/// A schedule synthesised for per-stage costs and a memory limit (what a rank may hold, in the
/// unit of the costs' `activation` and `weight_stash`: by default a microbatch's activations of its
/// stage, of which 1F1B needs p, ZB-H2 2p - 1). One stage a rank, split backward.
/// `heuristic_only`: the heuristic's own order even where a handcrafted one is faster.
struct synthesised_schedule {
  int ranks = 1, microbatches = 1;
  synthesis_costs costs{};
  int memory_limit = 1;
  bool heuristic_only = false;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::synthesise")
  constexpr schedule_info info() const { return {"synthesised", ranks, microbatches, 1, 0}; }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return ranks; }
  constexpr int program_length() const { return 3 * microbatches; }  // F, I and W of its stage
  constexpr param_check validate() const {
    if (ranks > synthesis_costs::max_stages) return {param_rule::ranks_within_synthesis, ranks};
    if (costs.activation < 1 || costs.weight_stash < 0 || costs.weight_stash > costs.activation)
      return {param_rule::memory_units, costs.activation < 1 ? costs.activation : costs.weight_stash};
    if (memory_limit < costs.activation) return {param_rule::memory_limit_at_least_one, memory_limit};
    if (costs.comm < 0) return {param_rule::costs_positive, costs.comm};
    for (int j = 0; j < ranks && j < synthesis_costs::max_stages; ++j) {
      const op_costs& s = costs.stage[j];
      const int least = s.forward < s.input ? (s.forward < s.weight ? s.forward : s.weight)
                                            : (s.input < s.weight ? s.input : s.weight);
      if (least < 1) return {param_rule::costs_positive, least};
    }
    return {};
  }

  /// What synthesis found (the heuristic's figure and the order chosen).
  constexpr synthesis_report report() const {
    return report(detail::greedy_schedule(ranks, microbatches, costs, memory_limit));
  }

  template <class Sink>
  constexpr void emit(Sink& out) const {
    const detail::greedy_order g = detail::greedy_schedule(ranks, microbatches, costs, memory_limit);
    const synthesis_source chosen = report(g).chosen;
    if (chosen == synthesis_source::one_f_one_b) return one_f_one_b(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::zb_h1) return zb_h1(ranks, microbatches).emit(out);
    if (chosen == synthesis_source::zb_h2) return zb_h2(ranks, microbatches).emit(out);
    if (chosen != synthesis_source::heuristic) return;  // nothing fits: an empty table fails its proof
    constexpr op_kind ops[3] = {op_kind::forward, op_kind::backward_input, op_kind::backward_weight};
    for (int j = 0; j < ranks; ++j)
      for (int k = 0; k < 3 * microbatches; ++k) {
        const std::size_t at = static_cast<std::size_t>(j) * 3 * microbatches + k;
        out.push(j, make_compute(ops[g.kind.data()[at]], j, g.microbatch.data()[at]));
      }
  }

 private:
  constexpr synthesis_report report(const detail::greedy_order& g) const {
    synthesis_report r{};
    for (int j = 0; j < ranks; ++j) {
      const op_costs& s = costs.stage[j];
      const long long w = static_cast<long long>(microbatches) * (s.forward + s.input + s.weight);
      r.work = w > r.work ? w : r.work;
    }
    if (g.ok) {
      r.heuristic_span = g.span;
      r.heuristic_peak = detail::greedy_peak(g, costs);
      r.chosen = synthesis_source::heuristic;
      r.chosen_span = g.span;
      r.chosen_peak = r.heuristic_peak;
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
    consider(synthesis_source::one_f_one_b, detail::replay_schedule(one_f_one_b(ranks, microbatches), costs));
    consider(synthesis_source::zb_h1, detail::replay_schedule(zb_h1(ranks, microbatches), costs));
    consider(synthesis_source::zb_h2, detail::replay_schedule(zb_h2(ranks, microbatches), costs));
    return r;
  }

 public:
  friend constexpr bool operator==(const synthesised_schedule&, const synthesised_schedule&) = default;
};

/// The schedule for `ranks` stages (one a rank) and `microbatches`, under per-stage `costs` and a
/// limit of `memory_limit` a rank (activations, or the unit of the costs' `activation`): the better
/// of the heuristic's order and the handcrafted ones that fit.
constexpr synthesised_schedule synthesise(int ranks, int microbatches, const synthesis_costs& costs, int memory_limit) {
  return {ranks, microbatches, costs, memory_limit, false};
}
/// The heuristic's own order, whatever the handcrafted ones would do.
constexpr synthesised_schedule synthesise_heuristic(int ranks, int microbatches, const synthesis_costs& costs,
                                                    int memory_limit) {
  return {ranks, microbatches, costs, memory_limit, true};
}

}  // namespace ctpipe
