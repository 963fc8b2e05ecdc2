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

/// Instantiated by every executor: Kind names it, Plan is make_execution_plan<Table>(), Stages the
/// stage plan of Model.
template <executor_kind Kind, auto Table, auto Plan, class Model, auto Stages>
struct executor_requirements {
  static constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(Plan.table)::static_stages);
  static_assert(check_comm<Table>(), "ctpipe executor: the table does not verify (see the error above)");
  static_assert(Stages.stages() == stage_count,
                "ctpipe executor: the stage plan must have as many stages as the table (ranks x chunks)");
  static_assert(Stages.first[0] >= 0 && Stages.first[detail::ix(Stages.stages())] == static_cast<int>(Model::size),
                "ctpipe executor: the stage plan must cover the model's layers, from its first stage's first layer to "
                "the number of layers");
  static_assert(Stages.first[0] == 0 || Kind == executor_kind::host || Kind == executor_kind::async ||
                    Kind == executor_kind::mpi,
                "ctpipe executor: a stage plan that starts past layer 0 (a frozen prefix: freeze_partition) runs on "
                "the executors of host layers only (host_executor, async_executor, mpi::executor)");
  static_assert(std::ranges::all_of(Plan.backward_in_order, [](bool b) { return b; }),
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
