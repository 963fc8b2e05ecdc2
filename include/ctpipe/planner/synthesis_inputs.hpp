// A synthesised plan's inputs (planned_schedule::synthesised): the plan's own stage costs, in whole
// units, and the activations its ranks have room for, so that synthesis (schedule/synthesis.hpp)
// orders the ops for the stages the planner split.
#pragma once

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/planner/predict.hpp>

namespace ctpipe {

/// `c` (planned_schedule::synthesised) with its synthesis inputs filled in, as the search fills them
/// in (predict needs them: a synthesised choice's memory_limit 0 breaks synthesis's rule). Costs: each stage's F, I and
/// W in a unit of a thousandth of the slowest stage's F + I + W (rounded, at least 1), the message latency the slowest
/// message of a stage (forward or backward) in the same unit. Memory: the activations (of the largest microbatch
/// factor) that fit on every rank beside its parameters' state and the reserve, at most 2p (the paper's ZB-2p: more
/// buys the heuristic nothing) and at least 1; 2p where memory is unlimited. The choice must pass check_choice, with
/// one stage a rank.
constexpr plan_choice with_synthesis_inputs(const plan_request& q, plan_choice c) {
  const detail::stage_figures s = detail::stage_figures_of(q, c, q.global_batch / (c.replicas * c.microbatches));
  const int stages = s.stages < synthesis_costs::max_stages ? s.stages : synthesis_costs::max_stages;
  double slowest = 0.0, comm = 0.0;
  for (int st = 0; st < stages; ++st) {
    const double work = s.f.data()[st] + s.i.data()[st] + s.w.data()[st];
    slowest = work > slowest ? work : slowest;
    const double msg = s.msg_fwd.data()[st] > s.msg_bwd.data()[st] ? s.msg_fwd.data()[st] : s.msg_bwd.data()[st];
    comm = msg > comm ? msg : comm;
  }
  const double unit = slowest > 0.0 ? slowest / 1000.0 : 1.0;
  const auto whole = [unit](double t) {
    const double x = t / unit + 0.5;
    return x < 1.0 ? 1 : x > 1e9 ? 1000000000 : static_cast<int>(x);
  };
  c.costs = synthesis_costs{};
  for (int st = 0; st < stages; ++st)
    c.costs.stage[st] = {whole(s.f.data()[st]), whole(s.i.data()[st]), whole(s.w.data()[st])};
  c.costs.comm = comm > 0.0 ? whole(comm) : 0;

  int limit = 2 * c.ranks;
  if (q.cluster.memory_bytes > 0.0) {
    double factor = 1.0;  // the largest microbatch's activations bound the peak
    for (const double k : q.microbatch_factors) factor = k > factor ? k : factor;
    const auto p = static_cast<std::size_t>(c.ranks);
    detail::buffer<double> params(p), tied(p), ready(p);
    detail::rank_parameters(
        q, s, c.ranks, [](int st) { return st; }, params.data(), tied.data(), nullptr, ready.data());
    for (int r = 0; r < c.ranks && r < s.stages; ++r) {
      const double keep = factor * s.keep.data()[r];
      if (!(keep > 0.0)) continue;
      const double room =
          (q.cluster.memory_bytes - q.cluster.reserved_bytes - q.state_factor * params.data()[r]) / keep;
      const int fit = room < 1.0 ? 1 : room > limit ? limit : static_cast<int>(room);
      limit = fit < limit ? fit : limit;
    }
  }
  c.memory_limit = limit;
  return c;
}

}  // namespace ctpipe
