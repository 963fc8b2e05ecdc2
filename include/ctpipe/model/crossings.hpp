// The crossings of a model split into stages: which stages a graph-shaped model's skip connections
// join, once its layers are placed. For every two stages at least two apart, the tensors the
// earlier one produces that the later one reads travel as one skip message a microbatch (its bytes:
// each such tensor once, however many layers of the later stage read it). Tensors a stage reads
// from the stage just before it travel in that boundary's own message; the model's input counts as
// made by stage 0, and a frozen prefix's layers (PipeTransformer) as stage 0's.
//
//   constexpr auto plan = ctpipe::stage_bounds<Model, 0, 2, 4, 6>();
//   constexpr auto skips = ctpipe::model_crossings<Model, plan>();    // std::array<crossing, K>
//   constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(3, 8), skips>();
#pragma once

#include <array>
#include <cstddef>

#include <ctpipe/model/partition.hpp>
#include <ctpipe/schedule/crossing.hpp>

namespace ctpipe {

namespace detail {
// The stage that makes what layer `l` outputs (-1: the model's input, made by stage 0).
template <std::size_t S>
constexpr int producing_stage(const stage_plan<S>& plan, int l) {
  return l < 0 ? 0 : plan.stage_of_layer(l);
}

// Writes the crossings of `edges` under `plan` to `out` (where not null) and returns how many.
template <std::size_t S, std::size_t E>
constexpr int list_crossings(const stage_plan<S>& plan, const std::array<edge, E>& edges, crossing* out) {
  int n = 0;
  for (int a = 0; a < static_cast<int>(S); ++a)
    for (int b = a + 2; b < static_cast<int>(S); ++b) {
      std::size_t bytes = 0;
      bool any = false;
      for (std::size_t i = 0; i < E; ++i) {
        const edge& e = edges[i];
        if (producing_stage(plan, e.producer) != a || plan.stage_of_layer(e.consumer) != b) continue;
        bool seen = false;  // the same tensor read by an earlier layer of stage b
        for (std::size_t j = 0; j < i && !seen; ++j)
          seen = edges[j].producer == e.producer && edges[j].output == e.output &&
                 plan.stage_of_layer(edges[j].consumer) == b;
        if (!seen) bytes += e.bytes;
        any = true;
      }
      if (any && out != nullptr) out[n] = crossing{a, b, bytes};
      n += any;
    }
  return n;
}
}  // namespace detail

/// The crossings of `Model` split into stages by `Plan` (a stage_plan), in increasing order of
/// (from, to): the input of make_table<S, Crossings>() for a schedule with Plan's stages. Empty for
/// a chain model.
template <model_type Model, auto Plan>
consteval auto model_crossings() {
  constexpr int n = detail::list_crossings(Plan, Model::edges, nullptr);
  std::array<crossing, static_cast<std::size_t>(n)> out{};
  if constexpr (n > 0) detail::list_crossings(Plan, Model::edges, out.data());
  return out;
}

}  // namespace ctpipe
