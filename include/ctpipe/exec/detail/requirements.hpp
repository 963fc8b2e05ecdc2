// What every executor requires of its table, model and stage plan, checked at compile time in one
// place with one wording. The executor that was instantiated is the first template argument of
// executor_requirements in the compiler's "required from" lines.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/analysis/check.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/plan.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/partition.hpp>  // stage_plan

namespace ctpipe::detail {

/// The executors, by name: the name every message of theirs starts with.
enum class executor_kind { host, cuda, mpi, nccl, async };
constexpr std::string_view executor_name(executor_kind k) {
  switch (k) {
    case executor_kind::host:
      return "ctpipe::host_executor";
    case executor_kind::cuda:
      return "ctpipe::cuda::executor";
    case executor_kind::mpi:
      return "ctpipe::mpi::executor";
    case executor_kind::nccl:
      return "ctpipe::nccl::executor";
    case executor_kind::async:
      return "ctpipe::async_executor";
  }
  return "ctpipe executor";
}

template <auto Table>
consteval bool has_comm_ops() {
  for (int r = 0; r < Table.ranks(); ++r)
    for (const task& x : Table.program(r))
      if (comm_op[static_cast<int>(x.op)]) return true;
  return false;
}
// The plan verifies the compute order (it lowers the table anew); a table that brings its own sends
// and receives must place them correctly too: a wrong one is still a bug.
template <auto Table>
consteval bool check_comm() {
  if constexpr (has_comm_ops<Table>())
    return check<Table>();
  else
    return true;
}

// The stage plan's rules, each once: its stage count is the table's; it covers the model's layers
// from its first stage's first layer to the last layer; no stage is empty.
template <class Model, int StageCount, auto Stages>
consteval bool stage_count_fits() {
  return Stages.stages() == StageCount;
}
template <class Model, auto Stages>
consteval bool stages_cover() {
  return Stages.first[0] >= 0 && Stages.first[detail::ix(Stages.stages())] == static_cast<int>(Model::size);
}
template <auto Stages>
consteval bool stages_not_empty() {
  for (int s = 0; s < Stages.stages(); ++s)
    if (Stages.layers(s) < 1) return false;
  return true;
}
template <class Model, int StageCount, auto Stages>
consteval bool stages_fit() {
  return stage_count_fits<Model, StageCount, Stages>() && stages_cover<Model, Stages>() && stages_not_empty<Stages>();
}

/// The stage plan an executor builds on: Stages itself where it keeps the rules above, else a
/// stand-in of the table's stage count that the engines can build, so that a plan refused by
/// executor_requirements (or by partition) stops at its rule's message and no cascade follows.
template <class Model, int StageCount, auto Stages>
consteval stage_plan<detail::ix(StageCount)> usable_stages() {
  stage_plan<detail::ix(StageCount)> p{};
  if constexpr (stages_fit<Model, StageCount, Stages>()) {
    p.first = Stages.first;
    p.recompute = Stages.recompute;
    p.cost = Stages.cost;
    p.max_stage_cost = Stages.max_stage_cost;
    p.frozen_cost = Stages.frozen_cost;
  } else {
    const int layers = static_cast<int>(Model::size);
    for (int s = 0; s < StageCount; ++s) p.first[detail::ix(s)] = s < layers ? s : layers;
    p.first[detail::ix(StageCount)] = layers;
  }
  return p;
}

/// True where every stage of an execution plan runs its backward ops in microbatch order.
template <class ExecutionPlan>
constexpr bool backward_in_order(const ExecutionPlan& plan) {
  return std::ranges::all_of(plan.backward_in_order, [](bool b) { return b; });
}

/// Instantiated by every executor: Kind names it, Stages is the stage plan of Model; StageCount and
/// InOrder come from make_execution_plan<Table>() (its stage count, and backward_in_order of it).
/// The execution plan itself is no argument: the compiler would print all of it with each message.
template <executor_kind Kind, auto Table, class Model, auto Stages, int StageCount, bool InOrder>
struct executor_requirements {
  static constexpr int stage_count = StageCount;
  static_assert(check_comm<Table>(), "ctpipe executor: the table does not verify (see the error above)");
  static_assert(stage_count_fits<Model, stage_count, Stages>(),
                "ctpipe executor: the stage plan must have as many stages as the table (ranks x chunks)");
  static_assert(!stage_count_fits<Model, stage_count, Stages>() || stages_cover<Model, Stages>(),
                "ctpipe executor: the stage plan must cover the model's layers, from its first stage's first layer to "
                "the number of layers");
  static_assert(Stages.refused || !stage_count_fits<Model, stage_count, Stages>() || !stages_cover<Model, Stages>() ||
                    stages_not_empty<Stages>(),
                "ctpipe executor: every stage of the stage plan must hold at least one layer");
  static_assert(Stages.first[0] == 0 || Kind == executor_kind::host || Kind == executor_kind::async ||
                    Kind == executor_kind::mpi,
                "ctpipe executor: a stage plan that starts past layer 0 (a frozen prefix: freeze_partition) runs on "
                "the executors of host layers only (host_executor, async_executor, mpi::executor)");
  static_assert(InOrder,
                "ctpipe executor: every stage must run its backward ops in microbatch order, so that gradients "
                "accumulate in microbatch order and a step is deterministic");
  static constexpr bool value = true;
};

/// The run-time check of a step's arguments, with one wording: `call` is "ctpipe::host_executor::step".
inline void check_microbatches(std::string_view call, std::size_t inputs, std::size_t targets, int microbatches) {
  if (inputs != detail::ix(microbatches) || targets != detail::ix(microbatches))
    throw std::invalid_argument(std::string(call) + ": inputs (" + std::to_string(inputs) + ") and targets (" +
                                std::to_string(targets) + ") must each hold " + std::to_string(microbatches) +
                                " microbatches, as the table does");
}

}  // namespace ctpipe::detail
