// Where the CUDA executor sums a shared group's gradients (ctpipe/model/shared_parameters.hpp) in
// its one global issue order (make_issue_plan). Each rank that holds a member is done with it after
// its last B or W of a stage that holds one (exec/detail/shared_sums.hpp: group_last_op). Of those
// ranks, the one whose such task comes last in the issue order sums the group: after that task its
// stream waits for an event that each other holder recorded after its own, then adds the members'
// gradients in layer order and copies the sum back into each member. The sum thus starts as soon as
// the group's last backward has run, and overlaps the rest of the step on the other streams. A
// bidirectional table's (dualpipe) two copies of a model stage are summed the same way.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::cuda::detail {

/// Per task of the issue order, the groups (bit G: group G) whose event its rank records after it,
/// and the groups its rank sums after it.
template <std::size_t N>
struct group_points {
  std::array<std::uint32_t, N> record{}, sum{};
};

// Marks group G's points: `last[r]`, rank r's last task of the group in its program (-1: none).
template <auto Issue, std::size_t N, std::size_t Ranks>
constexpr void mark_points(group_points<N>& p, const std::array<std::ptrdiff_t, Ranks>& last, std::size_t g) {
  std::array<std::ptrdiff_t, Ranks> at{};
  at.fill(-1);
  std::ptrdiff_t summer = -1;
  for (std::size_t i = 0; i < N; ++i) {
    const auto r = ctpipe::detail::ix(Issue.order[i].rank);
    if (last[r] >= 0 && Issue.order[i].index == last[r]) {
      at[r] = static_cast<std::ptrdiff_t>(i);
      summer = static_cast<std::ptrdiff_t>(i);  // (the last one found is the last in the order)
    }
  }
  for (std::size_t r = 0; r < Ranks; ++r)
    if (at[r] >= 0 && at[r] != summer) p.record[ctpipe::detail::ix(at[r])] |= std::uint32_t{1} << g;
  if (summer >= 0) p.sum[ctpipe::detail::ix(summer)] |= std::uint32_t{1} << g;
}

/// The group points of execution plan ExecPlan issued in Issue's order, for Model split by Stages.
template <auto ExecPlan, auto Issue, class Model, auto Stages>
consteval auto make_group_points() {
  constexpr std::size_t n = Issue.order.size();
  constexpr std::size_t ranks = ExecPlan.table.programs.size();
  static_assert(shared_group_count<Model> <= 32,
                "ctpipe::cuda::executor: a model may have at most 32 groups of layers that share parameters");
  group_points<n> p{};
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    const auto last = [&]<std::size_t... R>(std::index_sequence<R...>) {
      return std::array<std::ptrdiff_t, ranks>{
          ctpipe::detail::group_last_op<ExecPlan, Model, Stages, static_cast<int>(R)>[G]...};
    }
    (std::make_index_sequence<ranks>{});
    mark_points<Issue>(p, last, G);
  });
  return p;
}

/// A bidirectional table's mirrors (dualpipe) as groups: bit J for model stage J, whose two copies
/// (stages J and chain_length + J) are final on their ranks after each one's last B or W of them.
template <auto ExecPlan, auto Issue>
consteval auto make_mirror_points() {
  constexpr std::size_t n = Issue.order.size();
  constexpr std::size_t ranks = ExecPlan.table.programs.size();
  constexpr int chain = ExecPlan.chain_length;
  static_assert(chain <= 32, "ctpipe::cuda::executor: a bidirectional table may have at most 32 stages per pipeline");
  group_points<n> p{};
  for (int j = 0; j < chain; ++j) {
    std::array<std::ptrdiff_t, ranks> last{};
    last.fill(-1);
    for (std::size_t r = 0; r < ranks; ++r)
      for (int i = 0; i < ExecPlan.table.length[r]; ++i) {
        const task& t = ExecPlan.table.programs[r][ctpipe::detail::ix(i)];
        if ((t.op == op_kind::backward || t.op == op_kind::backward_weight) && t.stage % chain == j) last[r] = i;
      }
    mark_points<Issue>(p, last, ctpipe::detail::ix(j));
  }
  return p;
}

}  // namespace ctpipe::cuda::detail
