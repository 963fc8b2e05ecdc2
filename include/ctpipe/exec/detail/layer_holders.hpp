// Who holds each layer in a job of one process per pipeline rank (times data-parallel replicas):
// the rules by which ctpipe::optimizer's place (optim/optimizer.hpp: parameter_place) divides a
// model among the processes of the MPI executor, its device path and the NCCL executor. A process
// updates every layer of the stages its rank runs (a bidirectional table's two copies of a model
// stage included); exactly one process counts each layer, once, in the global gradient norm and
// writes it in a checkpoint: replica 0's process of the rank that runs the layer's stage in the
// first pipeline.
#pragma once

#include <cstddef>

#include <ctpipe/detail/index.hpp>

namespace ctpipe::detail {

/// Whether pipeline rank r runs a stage that is a copy of layer k's model stage (Plan: an
/// execution plan; Stages: its stage plan; `layers`: the model's size).
template <auto Plan, auto Stages>
constexpr bool rank_runs_layer(int r, std::size_t k, std::size_t layers) {
  if (k >= layers) return false;
  const int ms = Stages.stage_of_layer(static_cast<int>(k));
  const int stages = static_cast<int>(Plan.table.stage_rank.size());
  for (int s = 0; s < stages; ++s)
    if (s % Plan.chain_length == ms && Plan.table.stage_rank[ix(s)] == r) return true;
  return false;
}

/// Whether the process of pipeline rank r and replica `replica` counts layer k.
template <auto Plan, auto Stages>
constexpr bool rank_counts_layer(int r, int replica, std::size_t k, std::size_t layers) {
  return k < layers && replica == 0 && Plan.table.stage_rank[ix(Stages.stage_of_layer(static_cast<int>(k)))] == r;
}

}  // namespace ctpipe::detail
