// The schedule entry points: a schedule's lowered task table (compute ops with their sends and
// receives) at compile time, make_table<S>(), and at run time, generate(s). Both check the
// schedule's parameters at this entry point and lower the generator's compute ops. A table's
// forward-only table (evaluation, inference): make_forward_table<T>(), forward_table(t).
//
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8)>();   // a structural value
//   ctpipe::dynamic_table t = ctpipe::generate(ctpipe::interleaved(4, 8, 2)); // throws schedule_error
//
// Given crossings (skip connections between stages, crossing.hpp), the table carries their skip
// messages too:
//
//   constexpr std::array<ctpipe::crossing, 1> skips{{{.from = 0, .to = 2, .bytes = 4096}}};
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(4, 8), skips>();
#pragma once

#include <array>
#include <span>

#include <ctpipe/analysis/lower.hpp>
#include <ctpipe/schedule/forward.hpp>
#include <ctpipe/schedule/generate.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// The lowered table of schedule `S`: compute ops with sends and receives, built at compile time,
/// with the skip messages of `Crossings` (a std::array<ctpipe::crossing, K>).
template <auto S, auto Crossings = std::array<crossing, 0>{}>
requires schedule_generator<CTPIPE_NTTP_TYPE(S)>
consteval auto make_table() {
  constexpr auto compute = make_compute_table<S>();
  if constexpr (!validate(S).ok()) {
    return compute;  // make_compute_table has already failed with the rule's message
  } else {
    return make_lowered_table<compute, Crossings>();
  }
}

/// Run time: the lowered table of `s`, with the skip messages of the crossings `cs`. Throws
/// schedule_error for parameters that break a rule.
template <schedule_generator S>
dynamic_table generate(const S& s, std::span<const crossing> cs = {}) {
  return lower(generate_compute(s), cs);
}

/// The forward-only table of `Table` (a training table, compute or lowered), lowered, at compile
/// time: the same stages on the same ranks, each rank's F ops in the order `Table` runs them, with
/// their sends and receives (schedule/forward.hpp). What an executor's evaluate() and predict() run.
template <auto Table>
requires table_like<CTPIPE_NTTP_TYPE(Table)>
consteval auto make_forward_table() {
  constexpr auto compute = make_forward_compute_table<Table>();
  return make_lowered_table<compute>();
}

/// Run time: the forward-only table of `t`, lowered.
template <table_like Table>
dynamic_table forward_table(const Table& t) {
  return lower(forward_pass(t));
}

}  // namespace ctpipe
