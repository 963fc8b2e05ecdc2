// Written by `ctpipe plan --emit-header` from `ctpipe plan /tmp/tmp.f5nAKHNr0j/gpt_model.json --devices 2 --batch 16 --ranks 2 --schedules 1f1b --microbatches 16 --no-recompute --top 1 --emit-header /work/main/build/bench/gpt_split_plan.hpp --namespace gpt_split`:
// the best plan it found, 1f1b on 2 rank(s) x 1 replica(s), 16 microbatches of 1 sample(s) a replica and step;
// predicted step 0.00765285 (pipeline 0.00765285, all-reduce 0, bubble 0.0951232), in the model file's time unit.
// Its stages split the 28 layers by the model file's times, the loss counted where the file counts it. To run it:
//
//   constexpr auto stages = gpt_split::stages<Model>();
//   constexpr auto table = ctpipe::make_table<gpt_split::schedule, ctpipe::model_crossings<Model, stages>()>();
//   ctpipe::host_executor<table, Model, stages, Loss> exec(model, loss);  // (or any executor)
//
// with gpt_split::microbatches microbatches of gpt_split::microbatch_size samples a step.
#pragma once

#include <ctpipe/model/partition.hpp>  // stage_bounds
#include <ctpipe/schedules.hpp>

namespace gpt_split {

inline constexpr int ranks = 2;  // pipeline depth
inline constexpr int replicas = 1;  // data-parallel width
inline constexpr int microbatches = 16;  // per replica and step
inline constexpr int microbatch_size = 1;  // samples
inline constexpr int chunks = 1;  // stages per rank
inline constexpr bool recompute = false;
inline constexpr int layers = 28;  // the model file's
inline constexpr double predicted_step = 0.00765285;
inline constexpr auto schedule = ctpipe::one_f_one_b(2, 16);

/// The stage plan: the layers the planner put on each stage.
template <ctpipe::model_type Model>
consteval auto stages() {
  static_assert(Model::size == layers, "gpt_split::stages: this plan splits a model of 28 layers (its model file's), and Model has another number");
  return ctpipe::stage_bounds<Model, 0, 16, 28>();
}

}  // namespace gpt_split
