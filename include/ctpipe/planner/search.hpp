// The planner's search: every pipeline depth x data-parallel width that uses the devices, every
// schedule asked for (on one rank, one of them: they all run the same plan there), every whole microbatch count up to
// the limit, every chunk count for the schedules that take one, with and without recomputation; each plan's stages
// balanced by time. Plans are visited in order of a lower bound on their step time (predict.hpp) and simulated until
// the bound passes the slowest plan kept: what is left cannot enter the list, so the answer is the
// one an exhaustive search gives. Plain constexpr.
#pragma once

#include <algorithm>
#include <array>

#include <ctpipe/planner/predict.hpp>
#include <ctpipe/planner/synthesis_inputs.hpp>

namespace ctpipe {

inline constexpr int plan_list_size = 8;  // the most plans a result lists (plan_request::keep)
inline constexpr int param_rule_count = static_cast<int>(param_rule::stages_fit_in_int) + 1;

/// The planner's answer.
struct plan_result {
  std::array<plan_figures, plan_list_size> best{};  // the fastest plans that fit, fastest first
  int best_count = 0;
  // The plans predicted faster than the best that fits, rejected for their memory, fastest first.
  std::array<plan_figures, plan_list_size> over_memory{};
  int over_memory_count = 0;
  // How many plans ...
  int considered = 0;       // ... were formed (devices, batch and layers allow them)
  int simulated = 0;        // ... were simulated
  int pruned = 0;           // ... were left out because their bound could not enter the list
  int too_much_memory = 0;  // ... of those simulated did not fit
  int too_few_layers = 0;   // ... had more stages than layers
  int too_large = 0;        // ... had tables beyond plan_request::max_table_tasks (not simulated)
  int same_plan = 0;        // ... were another's: on one rank, other schedules and chunks (one_rank_schedule)
  // ... broke a schedule's own rules, by schedule and rule (param_rule); these were not simulated.
  std::array<std::array<int, param_rule_count>, planned_schedule_count> broke_rule{};

  constexpr const plan_figures& top() const { return best[0]; }
};

namespace detail {

// Plans in the order the search lists them: faster first, then the order they were formed in.
struct ranked {
  double time = 0.0;
  int order = 0;
  constexpr bool operator<(const ranked& o) const { return time < o.time || (time == o.time && order < o.order); }
};

// A list of at most n plans, fastest first.
constexpr void keep_fastest(std::array<plan_figures, plan_list_size>& list, std::array<int, plan_list_size>& orders,
                            int& count, int n, const plan_figures& f, int order) {
  const ranked key{f.step_time, order};
  int at = count;
  while (at > 0 &&
         key < ranked{list[static_cast<std::size_t>(at - 1)].step_time, orders[static_cast<std::size_t>(at - 1)]})
    --at;
  if (at >= n) return;
  for (int i = (count < n ? count : n - 1); i > at; --i) {
    list[static_cast<std::size_t>(i)] = list[static_cast<std::size_t>(i - 1)];
    orders[static_cast<std::size_t>(i)] = orders[static_cast<std::size_t>(i - 1)];
  }
  list[static_cast<std::size_t>(at)] = f;
  orders[static_cast<std::size_t>(at)] = order;
  count = count < n ? count + 1 : n;
}

// Calls f(choice) for every plan of the search space the devices, batch and layers allow, in a
// fixed order; counts the plans with more stages than layers into `too_few_layers`, those with
// tables beyond the request's max_table_tasks into `too_large`, and those that are another plan
// into `same_plan` (on one rank, only one_rank_schedule's, with its fewest chunks, is formed).
template <class F>
constexpr void for_each_choice(const plan_request& q, int& too_few_layers, int& too_large, int& same_plan, F&& f) {
  const int n = q.cluster.devices, layers = static_cast<int>(q.layers.size());
  for (int p = 1; p <= n; ++p) {
    if (n % p != 0 || (q.ranks > 0 && p != q.ranks)) continue;
    const int d = n / p;
    if (q.global_batch % d != 0) continue;
    const int per_replica = q.global_batch / d;
    for (int k = 0; k < planned_schedule_count; ++k) {
      const auto s = static_cast<planned_schedule>(k);
      if (!q.schedules.has(s)) continue;
      const bool v_shape = v_placed(s);
      const int v_first = v_shape ? 2 : takes_chunks(s) ? 2 : 1;
      const int v_last = v_shape ? 2 : takes_chunks(s) ? q.max_chunks : 1;
      for (int v = v_first; v <= v_last; ++v)
        for (int m = 1; m <= per_replica && m <= q.max_microbatches; ++m) {
          if (per_replica % m != 0 || (q.microbatches > 0 && m != q.microbatches)) continue;
          for (int rc = 0; rc <= (q.recompute && !splits_backward(s) ? 1 : 0); ++rc) {
            const plan_choice c{s, p, d, m, v, rc == 1};
            // (One that breaks its schedule's rules is counted as such, below; a synthesised one gets
            // its inputs last.)
            if (p == 1 && (s != one_rank_schedule(q.schedules) || v != v_first) &&
                (s == planned_schedule::synthesised || validate_choice(c).ok())) {
              ++same_plan;
              continue;
            }
            if (p * v > layers) {
              ++too_few_layers;
              continue;
            }
            // F, B (or I and W), and a send and a receive around most: at most 9 tasks per stage
            // and microbatch.
            if (9LL * p * v * m > q.max_table_tasks) {
              ++too_large;
              continue;
            }
            f(s == planned_schedule::synthesised ? with_synthesis_inputs(q, c) : c);
          }
        }
    }
  }
}

}  // namespace detail

/// The best plans for `q` (see the top of this header). Constexpr: a static_assert may ask it.
constexpr plan_result plan(const plan_request& q) {
  plan_result out{};
  const int keep = q.keep < 1 ? 1 : q.keep > plan_list_size ? plan_list_size : q.keep;
  if (q.cluster.devices < 1 || q.global_batch < 1 || q.layers.empty()) return out;
  detail::require_rule(check_request(q));

  // Form the plans and their bounds.
  int n = 0;
  detail::for_each_choice(q, out.too_few_layers, out.too_large, out.same_plan, [&](const plan_choice&) { ++n; });
  struct candidate {
    plan_choice choice;
    double bound;
    int order;
  };
  detail::buffer<candidate> all(static_cast<std::size_t>(n));
  int formed = 0, ignored = 0, ignored_too = 0, ignored_same = 0;
  detail::for_each_choice(q, ignored, ignored_too, ignored_same, [&](const plan_choice& c) {
    const param_check rule = validate_choice(c);
    if (!rule.ok()) {
      ++out.broke_rule[static_cast<std::size_t>(c.schedule)][static_cast<std::size_t>(rule.rule)];
      return;
    }
    all.data()[formed] = {c, lower_bound(q, c), formed};
    ++formed;
  });
  out.considered = formed;
  std::sort(all.data(), all.data() + formed, [](const candidate& a, const candidate& b) {
    return a.bound < b.bound || (a.bound == b.bound && a.order < b.order);
  });

  // Simulate in order of the bound until it passes the slowest plan kept.
  std::array<int, plan_list_size> best_order{}, over_order{};
  for (int i = 0; i < formed; ++i) {
    const candidate& x = all.data()[i];
    const double limit = out.best[static_cast<std::size_t>(keep - 1)].step_time;
    if (out.best_count == keep && x.bound > limit * (1.0 + 1e-9)) {
      out.pruned = formed - i;
      break;
    }
    const plan_figures f = predict(q, x.choice);
    ++out.simulated;
    if (f.fits) {
      detail::keep_fastest(out.best, best_order, out.best_count, keep, f, x.order);
    } else {
      ++out.too_much_memory;
      detail::keep_fastest(out.over_memory, over_order, out.over_memory_count, keep, f, x.order);
    }
  }
  // Only the rejected plans that would have beaten the best one are worth naming.
  if (out.best_count > 0)
    while (out.over_memory_count > 0 &&
           !(detail::ranked{out.over_memory[static_cast<std::size_t>(out.over_memory_count - 1)].step_time,
                            over_order[static_cast<std::size_t>(out.over_memory_count - 1)]} <
             detail::ranked{out.best[0].step_time, best_order[0]}))
      --out.over_memory_count;
  return out;
}

}  // namespace ctpipe
