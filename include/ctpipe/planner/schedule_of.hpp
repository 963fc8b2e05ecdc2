// A planned choice as the schedule value the executors take: each schedule is a type of its own, so
// the choice is a template argument, and a constant expression gives the plan the planner ranked:
//
//   constexpr ctpipe::plan_choice best = ctpipe::plan(q).top().choice;
//   constexpr auto table = ctpipe::make_table<ctpipe::schedule_of<best>()>();
//   constexpr auto stages = ctpipe::planned_stages<net, best>(q);   // ctpipe/model/planned_stages.hpp
//
// `ctpipe plan --emit-header` writes the same plan as a header (docs/planner.md).
#pragma once

#include <ctpipe/planner/request.hpp>
#include <ctpipe/schedules.hpp>

namespace ctpipe {

/// The schedule of choice C, as make_table takes it: ctpipe::one_f_one_b(C.ranks, C.microbatches),
/// ctpipe::interleaved(C.ranks, C.microbatches, C.chunks), ... (the planner's names: schedule_name_of);
/// a synthesised plan: ctpipe::synthesise_heuristic(C.ranks, C.microbatches, C.costs, C.memory_limit).
template <plan_choice C>
constexpr auto schedule_of() {
  constexpr int p = C.ranks, m = C.microbatches, v = C.chunks;
  if constexpr (C.schedule == planned_schedule::gpipe)
    return gpipe(p, m);
  else if constexpr (C.schedule == planned_schedule::one_f_one_b)
    return one_f_one_b(p, m);
  else if constexpr (C.schedule == planned_schedule::interleaved)
    return interleaved(p, m, v);
  else if constexpr (C.schedule == planned_schedule::looped_bfs)
    return looped_bfs(p, m, v);
  else if constexpr (C.schedule == planned_schedule::zb_h1)
    return zb_h1(p, m);
  else if constexpr (C.schedule == planned_schedule::zb_h2)
    return zb_h2(p, m);
  else if constexpr (C.schedule == planned_schedule::interleaved_zero_bubble)
    return interleaved_zero_bubble(p, m, v);
  else if constexpr (C.schedule == planned_schedule::zb_v)
    return zb_v(p, m);
  else if constexpr (C.schedule == planned_schedule::dualpipe)
    return dualpipe(p, m);
  else if constexpr (C.schedule == planned_schedule::v_min)
    return v_min(p, m);
  else if constexpr (C.schedule == planned_schedule::v_half)
    return v_half(p, m);
  else if constexpr (C.schedule == planned_schedule::synthesised)
    return synthesise_heuristic(p, m, C.costs, C.memory_limit);
  else
    return dualpipe_v(p, m);
}

}  // namespace ctpipe
