// The schedule entry points: a schedule's lowered task table (compute ops with their sends and
// receives) at compile time, make_table<S>(), and at run time, generate(s). Both check the
// schedule's parameters at this entry point and lower the generator's compute ops.
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

}  // namespace ctpipe
