// Where an executor sums a shared group's gradients (ctpipe/model/shared_parameters.hpp): which
// ranks hold its members, and the task after which a rank's members are final for the step (its
// last B or W of a stage that holds one). The executors with one rank program each (host threads,
// MPI processes, the process-mode CUDA engine) call after_task after every task; it starts the sums
// that task lets start: its stage's own (mirrors, replicas), then each group it finishes on its rank.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>        // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/program.hpp>  // last_weight_op
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::detail {

// The rank that runs layer k, under stage plan Stages and the table's stage_rank.
template <auto Stages, class StageRank>
constexpr int rank_of_layer(const StageRank& stage_rank, int k) {
  return stage_rank[ix(Stages.stage_of_layer(k))];
}

// Whether rank r holds a member of group G of Model.
template <class Model, std::size_t G, auto Stages, class StageRank>
constexpr bool holds_member(const StageRank& stage_rank, int r) {
  for (const int k : group_members<Model, G>)
    if (rank_of_layer<Stages>(stage_rank, k) == r) return true;
  return false;
}

/// Per group, how many ranks hold its members (1: its sum is local, no message).
template <class Model, auto Stages, class StageRank>
constexpr auto group_holders(const StageRank& stage_rank, int ranks) {
  std::array<int, shared_group_count<Model>> n{};
  [&]<std::size_t... G>(std::index_sequence<G...>) {
    ((n[G] =
          [&] {
            int c = 0;
            for (int r = 0; r < ranks; ++r) c += holds_member<Model, G, Stages>(stage_rank, r) ? 1 : 0;
            return c;
          }()),
     ...);
  }
  (std::make_index_sequence<shared_group_count<Model>>{});
  return n;
}

/// Per group, the colour under which the process of pipeline rank `rank` in replica `replica`
/// joins the group's communicator (the processes of one replica that hold its members): `replica`
/// where its rank holds a member of a group on several ranks, `none` elsewhere (no communicator).
template <class Model, auto Stages, class StageRank>
std::vector<int> group_colours(const StageRank& stage_rank, int ranks, int rank, int replica, int none) {
  const auto holders = group_holders<Model, Stages>(stage_rank, ranks);
  std::vector<int> c(shared_group_count<Model>, none);
  for_each_group<Model>([&]<std::size_t G>() {
    if (holders[G] > 1 && holds_member<Model, G, Stages>(stage_rank, rank)) c[G] = replica;
  });
  return c;
}

/// A bidirectional table (dualpipe) of `chain_length` stages per pipeline, run by a process per
/// rank: the one communicator's colour for the process of pipeline rank `rank` in replica
/// `replica`. Its pair: the process of rank chain_length - 1 - rank, which runs the other copies of
/// its two model stages (as a group of two, whose sum is an all-reduce of two).
inline std::vector<int> mirror_colours(int chain_length, int rank, int replica) {
  const int pair = rank < chain_length - 1 - rank ? rank : chain_length - 1 - rank;
  return {replica * chain_length + pair};
}

/// The two model stages whose copies the process of pipeline rank `rank` runs in such a table (the
/// first pipeline's stage `rank`, the second's copy of stage chain_length - 1 - rank), in the one
/// order in which it and its pair sum them (lower first): the order of their collectives.
constexpr std::array<int, 2> mirrored_stages(int chain_length, int rank) {
  const int a = rank, b = chain_length - 1 - rank;
  return a < b ? std::array<int, 2>{a, b} : std::array<int, 2>{b, a};
}

/// Starts the sums of the stages in Order (bit j of `ready`: stage j is final here; of `started`:
/// its sum has begun) in that order, f.template operator()<j>() each, up to the first that is not
/// ready: so every process issues them in Order, whatever order its stages are final in.
template <auto Order, class F>
void start_in_order(std::uint32_t ready, std::uint32_t& started, F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    bool blocked = false;
    (
        [&] {
          constexpr int j = Order[I];
          if (blocked || (started >> j & 1u) != 0) return;
          if ((ready >> j & 1u) == 0) {
            blocked = true;
            return;
          }
          f.template operator()<j>();
          started |= std::uint32_t{1} << j;
        }(),
        ...);
  }
  (std::make_index_sequence<Order.size()>{});
}

/// Per group, the index in rank R's program of the last B or W of a stage that holds one of its
/// members (after which those members' gradients are final for the step), or -1 where R holds none.
template <auto ExecPlan, class Model, auto Stages, int R>
inline constexpr auto group_last_op = [] {
  std::array<std::ptrdiff_t, shared_group_count<Model>> last{};
  last.fill(-1);
  const auto& p = ExecPlan.table.programs[ix(R)];
  [&]<std::size_t... G>(std::index_sequence<G...>) {
    (
        [&] {
          for (int i = 0; i < ExecPlan.table.length[ix(R)]; ++i) {
            const task& t = p[ix(i)];
            if (t.op != op_kind::backward && t.op != op_kind::backward_weight) continue;
            for (const int k : group_members<Model, G>)
              if (Stages.stage_of_layer(k) == t.stage) last[G] = i;
          }
        }(),
        ...);
  }
  (std::make_index_sequence<shared_group_count<Model>>{});
  return last;
}();

/// After task `index` of rank R's program, a B or W of stage S: f.template operator()<G>() for each
/// group whose members on R that task leaves final. Nothing at all for a model without groups.
template <auto ExecPlan, class Model, auto Stages, int R, int S, class F>
void after_backward(std::ptrdiff_t index, F&& f) {
  if constexpr (has_shared_parameters_v<Model>) {
    [&]<std::size_t... G>(std::index_sequence<G...>) {
      (
          [&] {
            constexpr std::ptrdiff_t last = group_last_op<ExecPlan, Model, Stages, R>[G];
            if constexpr (last >= 0 && ExecPlan.table.programs[ix(R)][ix(last)].stage == S)
              if (index == last) f.template operator()<G>();
          }(),
          ...);
    }
    (std::make_index_sequence<shared_group_count<Model>>{});
  }
}

/// After task `index` of rank R's program (C: its code), the sums it lets start, in the one order
/// of every executor that runs rank programs (host threads, MPI processes, the process-mode CUDA
/// engine), so that processes issue their collectives alike: where it is its stage's last B or W on
/// R, first stage_final(S) (the stage's gradients are final: a bidirectional table's mirror sum, or
/// the replicas' sum); then group_final(G) for each shared group whose members on R it leaves
/// final, by group (after_backward). S and G come as std::integral_constant.
template <auto ExecPlan, class Model, auto Stages, int R, task_code C, class StageFinal, class GroupFinal>
void after_task(std::ptrdiff_t index, StageFinal&& stage_final, GroupFinal&& group_final) {
  if constexpr (C.op == op_kind::backward || C.op == op_kind::backward_weight) {
    if (index == last_weight_op<ExecPlan, R>[ix(C.stage)]) stage_final(std::integral_constant<int, C.stage>{});
    after_backward<ExecPlan, Model, Stages, R, C.stage>(
        index, [&]<std::size_t G>() { group_final(std::integral_constant<std::size_t, G>{}); });
  }
}

}  // namespace ctpipe::detail
