// What every executor derives from its template arguments, once: the execution plan of its table,
// the rank and stage counts, the stage plan it builds on, the microbatches and the tensor types;
// and, before anything else, the rules it must keep (executor_requirements, for its Tag).
#pragma once

#include <algorithm>

#include <ctpipe/config.hpp>                    // CTPIPE_NTTP_TYPE
#include <ctpipe/exec/detail/requirements.hpp>  // usable_stages
#include <ctpipe/exec/plan.hpp>

namespace ctpipe::detail {

template <class Tag, auto Table, class Model, auto Stages, class Loss>
struct executor_shape {
  static constexpr auto plan = make_execution_plan<Table>();
  /// The table's stages: the model's (Stages), and for a bidirectional table their mirrored copies.
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_stages);
  /// The stages of the stage plan: one chain's (the table's, or half a bidirectional table's).
  static constexpr int model_stages = runs_chains<Tag, Table, Model, Stages>() ? plan.chain_length : stage_count;
  static_assert(executor_requirements<Tag, Table, Model, Stages, model_stages, backward_in_order(plan), Loss>::value);
  static constexpr auto& table = plan.table;
  static constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(plan.table)::static_ranks);
  /// Stages (a stand-in where Stages breaks a rule: executor_requirements has said which).
  static constexpr auto stages = usable_stages<Model, model_stages, Stages>();
  /// The per-stage layout the engines build on (exec/detail/stages.hpp).
  static constexpr auto layout = stage_layout_of(plan, model_stages);
  static constexpr int microbatches = Table.params.microbatches;
  /// The longest program of one rank: what dispatch::automatic compares with an executor's limit
  /// where a thread or process runs one rank.
  static constexpr int longest_program = *std::ranges::max_element(plan.table.length);
  using input_type = typename Model::input_type;
  using output_type = typename Model::output_type;
  using target_type = typename Loss::target_type;
};

}  // namespace ctpipe::detail
