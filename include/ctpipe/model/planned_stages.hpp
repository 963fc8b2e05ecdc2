// The planner's stage split as the stage plan an executor takes: the layers balanced by the times
// the request gives (measured, as ctpipe::measure_layers and `gpt --write-model` measure them, the
// loss counted in the last layer), where partition<> balances the layers' declared costs.
//
//   constexpr ctpipe::plan_choice best = ctpipe::plan(q).top().choice;
//   constexpr auto stages = ctpipe::planned_stages<net, best>(q);
//   constexpr auto table = ctpipe::make_table<ctpipe::schedule_of<best>(), ctpipe::model_crossings<net, stages>()>();
//   ctpipe::host_executor<table, net, stages, loss> exec(model, l);   // the plan the planner ranked
//
// `ctpipe plan --emit-header` writes the same split as stage_bounds<...> in a header.
#pragma once

#include <cstddef>

#include <ctpipe/model/partition.hpp>
#include <ctpipe/planner/predict.hpp>
#include <ctpipe/planner/schedule_of.hpp>

namespace ctpipe {

/// Choice C's stage plan for Model from the request the planner answered: its ranks x chunks
/// stages (dualpipe: ranks) over the layers as the planner balanced them (stage_split), every stage
/// recomputing where C recomputes; each stage's cost is the sum of its layers' declared costs. The
/// request must describe Model's layers, one layer_profile each, and C must pass check_choice.
template <model_type Model, plan_choice C>
consteval stage_plan<static_cast<std::size_t>(detail::model_stages_of(C))> planned_stages(const plan_request& q) {
  constexpr std::size_t S = static_cast<std::size_t>(detail::model_stages_of(C));
  if (q.layers.size() != Model::size)
    throw "ctpipe::planned_stages: the request describes another model: it needs one layer_profile per layer of Model";
  if (check_choice(q, C) != plan_rule::ok) throw "ctpipe::planned_stages: the choice breaks a plan rule (check_choice)";
  stage_plan<S> p{};
  stage_split(q, C, p.first.data());
  detail::fill_costs(p, Model::costs, 0.0);
  if (C.recompute) p.recompute.fill(true);
  return p;
}

}  // namespace ctpipe
