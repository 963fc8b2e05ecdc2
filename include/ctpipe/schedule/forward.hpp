// The forward-only table of a training table: what evaluation and inference run through the same
// pipeline, with the same stages on the same ranks.
//
//   constexpr auto train = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();
//   constexpr auto eval = ctpipe::make_forward_table<train>();   // make_table.hpp
//   static_assert(ctpipe::check<eval>());
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// The record of `t`'s forward-only table: `t`'s own (custom where it has none), forward_only set.
template <table_like T>
constexpr schedule_info forward_info(const T& t) {
  schedule_info p = custom_schedule(t.ranks(), t.microbatches(), 1, directions_of(t));
  if constexpr (requires { t.params; }) p = t.params;
  p.forward_only = true;
  return p;
}

/// Writes the compute ops of `t`'s forward-only table into `out`: on each rank, the F ops of `t`
/// in the order `t` runs them, none overlapped; B, I, W and every send and receive are dropped
/// (lower the result for its messages). The order cannot deadlock where `t`'s does not: an F
/// waits only on the F before it in its microbatch's chain, which `t` already ran before it, and
/// dropping the backward removes waits without adding any.
template <table_like T, class Sink>
requires table_sink<Sink>
constexpr void forward_pass(const T& t, Sink& out) {
  for (int r = 0; r < t.ranks(); ++r)
    for (const task& x : t.program(r))
      if (x.op == op_kind::forward) {
        task f = x;
        f.overlapped = false;
        out.push(r, f);
      }
}

/// Run time: the compute ops of `t`'s forward-only table (forward_pass), in a dynamic_table with
/// `t`'s placement and crossings.
template <table_like T>
dynamic_table forward_pass(const T& t) {
  std::vector<int> placement(static_cast<std::size_t>(t.stages()));
  for (int s = 0; s < t.stages(); ++s) placement[static_cast<std::size_t>(s)] = t.rank_of(s);
  dynamic_table out(forward_info(t), std::move(placement));
  const std::span<const crossing> cs = crossings_of(t);
  out.crossings.assign(cs.begin(), cs.end());
  forward_pass(t, out);
  return out;
}

namespace detail {
// The most F ops on one rank of `Table`: the forward-only compute table's capacity.
template <auto Table>
consteval std::size_t forward_capacity() {
  std::size_t most = 0;
  for (int r = 0; r < Table.ranks(); ++r) {
    std::size_t n = 0;
    for (const task& x : Table.program(r)) n += x.op == op_kind::forward;
    most = n > most ? n : most;
  }
  return most;
}
}  // namespace detail

/// Compile time: the compute ops of `Table`'s forward-only table, in a task_table sized to fit,
/// with `Table`'s placement and the crossings it lists.
template <auto Table>
consteval auto make_forward_compute_table() {
  constexpr std::span<const crossing> cs = crossings_of(Table);
  task_table<CTPIPE_NTTP_TYPE(Table)::static_ranks, CTPIPE_NTTP_TYPE(Table)::static_stages,
             detail::forward_capacity<Table>(), cs.size()>
      t{};
  t.params = forward_info(Table);
  for (int s = 0; s < Table.stages(); ++s) t.stage_rank[static_cast<std::size_t>(s)] = Table.rank_of(s);
  std::copy(cs.begin(), cs.end(), t.crossings.begin());  // (no loop: nvcc warns of k < 0 where there are none)
  detail::fill_programs(t, [](auto& sink) { forward_pass(Table, sink); });
  return t;
}

}  // namespace ctpipe
