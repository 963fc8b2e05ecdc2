// The per-stage layout every executor shares: which rank runs each stage, how many stash slots and
// same-rank hand-off slots it needs, how many messages each boundary holds in flight, and the tensor
// types of every stage. O(stages) numbers where the table is O(tasks): engines are templates of
// these alone, so that their per-task functions do not carry the whole table in their names (with
// the table in every symbol, a 2,000-task table took minutes and gigabytes to compile).
#pragma once

#include <array>
#include <cstddef>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/plan.hpp>
#include <ctpipe/model/model.hpp>

namespace ctpipe::detail {

template <std::size_t Ranks, std::size_t Stages, std::size_t Crossings = 0, std::size_t SkipEntries = 0>
struct stage_layout {
  static constexpr std::size_t ranks = Ranks, stages = Stages;
  int microbatches = 0;
  std::array<int, Stages> stage_rank{};
  std::array<int, Stages> stash_slots{};           // per stage
  std::array<int, Stages> local_forward_slots{};   // per boundary b (stage b -> b + 1 on one rank)
  std::array<int, Stages> local_backward_slots{};  // per boundary b (stage b + 1 -> b on one rank)
  std::array<int, Stages> channel_capacity{};      // per boundary b across ranks: messages in flight at most
  std::array<int, Stages> forward_messages{};      // per boundary b across ranks: activations a step carries
  std::array<int, Stages> backward_messages{};     // and gradients
  bool split_backward = false;                     // the table has I/W ops: stashes keep gradients from I to W
  int chain_length = static_cast<int>(Stages);     // stages per chain: Stages, or Stages / 2 (dualpipe's mirrors)
  bool forward_only = false;                       // a forward-only table: no backward, the last stage ends each F
  // The crossings' routes, and per (crossing, microbatch) their messages' ordinals or buffer slots
  // (execution_plan).
  std::array<skip_route, Crossings> skips{};
  std::array<int, SkipEntries> skip_value_at{};
  std::array<int, SkipEntries> skip_gradient_at{};
  constexpr bool operator==(const stage_layout&) const = default;
};

// `chain_length`: the stages of one chain the engines run (the plan's, unless a refused
// bidirectional table builds as one chain: see runs_chains).
template <std::size_t R, std::size_t S, std::size_t C, std::size_t K, std::size_t KM>
constexpr stage_layout<R, S, K, KM> stage_layout_of(const execution_plan<R, S, C, K, KM>& p, int chain_length = 0) {
  stage_layout<R, S, K, KM> l{p.table.microbatches(), p.table.stage_rank, p.stash_slots,      p.local_forward_slots,
                              p.local_backward_slots, p.channel_capacity, p.forward_messages, p.backward_messages,
                              p.split_backward,       p.chain_length,     p.forward_only,     p.skips,
                              p.skip_value_at,        p.skip_gradient_at};
  if (chain_length > 0) l.chain_length = chain_length;
  return l;
}

/// The tensor types of Model split by Stages (a stage_plan). Element K of stage S is the input of its
/// layer K (K = layer_count<S>: the stage's output).
template <class Model, auto Stages>
struct stage_types {
  template <int S>
  static constexpr int first_layer = Stages.first[detail::ix(S)];
  template <int S>
  static constexpr int end_layer = Stages.first[detail::ix(S) + 1];
  template <int S>
  static constexpr int layer_count = end_layer<S> - first_layer<S>;
  template <int S, int K>
  using element_t = boundary_t<Model, detail::ix(first_layer<S> + K)>;
  /// Every tensor of stage S's forward pass: its input, then each layer's output.
  template <int S>
  using full_t = boundaries_t<Model, detail::ix(first_layer<S>), detail::ix(layer_count<S> + 1)>;
  template <int S>
  using input_t = element_t<S, 0>;
  /// What boundary B (between stage B and B + 1) carries, forwards and backwards.
  template <int B>
  using boundary_tensor = element_t<B + 1, 0>;
};

}  // namespace ctpipe::detail
