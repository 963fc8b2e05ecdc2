// Stage plans: which layers each pipeline stage holds, and which stages recompute activations.
//
// partition<Model, S>() balances the layers into S contiguous stages at compile time, minimising
// the largest stage cost (PipeDream's dynamic program; an optional cost per stage boundary stands
// for the transfer of its activation). stage_bounds<Model, b0, b1, ..., bS>() takes the boundaries
// from the user. Both return a stage_plan, a structural value to static_assert on and to pass as a
// template argument to an executor.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include <ctpipe/analysis/analyse.hpp>  // stage_costs
#include <ctpipe/detail/balance.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/model/model.hpp>

namespace ctpipe {

/// Stage s holds layers [first[s], first[s + 1]). Stages with recompute set keep only their input
/// in the forward pass and run their forward again before the backward (GPipe's re-materialisation).
/// Where first[0] > 0, layers [0, first[0]) are frozen (PipeTransformer): stage 0's rank runs them
/// forward only, before its own layers, and keeps none of their activations (freeze_partition).
template <std::size_t S>
struct stage_plan {
  static constexpr std::size_t static_stages = S;

  std::array<int, S + 1> first{};
  std::array<bool, S> recompute{};
  std::array<double, S> cost{};  // declared cost of each stage (sum of its layers' costs)
  double max_stage_cost = 0.0;   // the figure the partition minimises (boundary costs included)
  double frozen_cost = 0.0;      // declared cost of the frozen prefix (forward only, on stage 0)
  bool refused = false;          // partition refused its arguments (its static_assert said why): an
                                 // executor given this plan adds no message of its own

  constexpr int stages() const { return static_cast<int>(S); }
  constexpr int begin(int s) const { return first[static_cast<std::size_t>(s)]; }
  constexpr int end(int s) const { return first[static_cast<std::size_t>(s) + 1]; }
  constexpr int layers(int s) const { return end(s) - begin(s); }
  /// Layers frozen before the first stage.
  constexpr int frozen() const { return first[0]; }
  /// The stage that holds layer `l`.
  constexpr int stage_of_layer(int l) const {
    int s = 0;
    while (s + 1 < stages() && end(s) <= l) ++s;
    return s;
  }
  /// The same plan with stage `s` recomputing its activations.
  constexpr stage_plan with_recompute(int s) const {
    stage_plan p = *this;
    p.recompute[static_cast<std::size_t>(s)] = true;
    return p;
  }
  /// The same plan with every stage recomputing.
  constexpr stage_plan recompute_all() const {
    stage_plan p = *this;
    p.recompute.fill(true);
    return p;
  }
  constexpr bool operator==(const stage_plan&) const = default;
};

namespace detail {
template <std::size_t L>
constexpr double sum_costs(const std::array<double, L>& c, int b, int e) {
  double s = 0.0;
  for (int i = b; i < e; ++i) s += c[static_cast<std::size_t>(i)];
  return s;
}
template <std::size_t S, std::size_t L>
constexpr void fill_costs(stage_plan<S>& p, const std::array<double, L>& c, double boundary_cost) {
  p.max_stage_cost = 0.0;
  for (int s = 0; s < static_cast<int>(S); ++s) {
    p.cost[static_cast<std::size_t>(s)] = sum_costs(c, p.begin(s), p.end(s));
    if (p.cost[static_cast<std::size_t>(s)] > p.max_stage_cost) p.max_stage_cost = p.cost[static_cast<std::size_t>(s)];
  }
  if (S > 1 && boundary_cost > p.max_stage_cost) p.max_stage_cost = boundary_cost;
}
}  // namespace detail

namespace detail {
// For a stage of layers [i, j): the bytes it sends, at [i * (L + 1) + j]. Each tensor made in
// [i, j) (the model's input counting as made with layer 0) and read at or after j counts once,
// whether it goes to the next stage or skips to a later one. (Per tensor, its producer and its last
// reader; then a sweep per j: O(L^2 + tensors x L).)
template <model_type Model>
constexpr buffer<double> sent_bytes() {
  constexpr std::size_t L = Model::size;
  constexpr auto& edges = Model::edges;
  buffer<double> at_layer((L + 1) * (L + 1));  // [p * (L + 1) + j]: made by layer p, read at or after j
  for (std::size_t e = 0; e < edges.size(); ++e) {
    bool seen = false;  // an earlier edge of the same tensor
    int last = edges[e].consumer;
    for (std::size_t f = 0; f < edges.size(); ++f) {
      const bool same = edges[f].producer == edges[e].producer && edges[f].output == edges[e].output;
      seen = seen || (same && f < e);
      last = same && edges[f].consumer > last ? edges[f].consumer : last;
    }
    const int p = edges[e].producer < 0 ? 0 : edges[e].producer;
    for (int j = p + 1; !seen && j <= last; ++j)
      at_layer[static_cast<std::size_t>(p) * (L + 1) + static_cast<std::size_t>(j)] +=
          static_cast<double>(edges[e].bytes);
  }
  buffer<double> out((L + 1) * (L + 1));
  for (std::size_t j = 1; j <= L; ++j) {
    double sum = 0.0;
    for (std::size_t i = j; i-- > 0;) {
      sum += at_layer[i * (L + 1) + j];
      out[i * (L + 1) + j] = sum;
    }
  }
  return out;
}
}  // namespace detail

namespace detail {
// partition<>'s work over the layers' costs `c` (the declared ones; with a loss, the last layer's
// grown by the loss's).
template <model_type Model, std::size_t S>
constexpr stage_plan<S> partition_by(const std::array<double, Model::size>& c, double boundary_cost,
                                     double cost_per_byte) {
  static_assert(S >= 1, "ctpipe::partition: stages must be at least 1");
  static_assert(S <= Model::size, "ctpipe::partition: more stages than layers; each stage needs at least one layer");
  constexpr std::size_t L = Model::size;
  stage_plan<S> p{};
  if constexpr (S < 1 || S > L) {
    // Refused above: a plan of empty stages that no executor takes (executor_requirements) and
    // nothing else fails on, so that the message above is the only one.
    for (std::size_t s = 0; s <= S; ++s) p.first[s] = static_cast<int>(s < L ? s : L);
    p.refused = true;
  } else if (cost_per_byte == 0.0) {
    detail::balance(c.data(), static_cast<int>(L), static_cast<int>(S), boundary_cost, p.first.data());
    detail::fill_costs(p, c, boundary_cost);
  } else {
    const auto bytes = detail::sent_bytes<Model>();
    detail::buffer<double> send((L + 1) * (L + 1));
    for (std::size_t k = 0; k < send.size(); ++k) send[k] = boundary_cost + cost_per_byte * bytes[k];
    detail::balance_with_sends(c.data(), static_cast<int>(L), static_cast<int>(S), send.data(), p.first.data());
    detail::fill_costs(p, c, 0.0);
    for (int s = 0; s + 1 < static_cast<int>(S); ++s) {
      const double x = send[static_cast<std::size_t>(p.begin(s)) * (L + 1) + static_cast<std::size_t>(p.end(s))];
      p.max_stage_cost = x > p.max_stage_cost ? x : p.max_stage_cost;
    }
  }
  return p;
}
}  // namespace detail

/// Splits Model's layers into S contiguous, non-empty stages minimising the largest of the stage
/// costs and each stage's send but the last's (a pipeline element of its own): `boundary_cost`
/// plus `cost_per_byte` times the bytes it sends (every tensor made in the stage and read by a
/// later one: its activation and what its skip connections carry; a tensor that skips over a stage
/// is sent by the stage that made it). A tensor read by several later stages counts once: a stage
/// is priced before the later stages are known, so this is a lower bound where it goes to several. With cost_per_byte =
/// 0, every boundary costs `boundary_cost` alike. Among equal optima the one with the earliest boundaries is taken.
template <model_type Model, std::size_t S>
consteval stage_plan<S> partition(double boundary_cost = 0.0, double cost_per_byte = 0.0) {
  return detail::partition_by<Model, S>(Model::costs, boundary_cost, cost_per_byte);
}

/// The same with the loss after the last layer counted on the last stage: Loss's declared cost
/// (`static constexpr double cost`, in the layers' units: the library's softmax_cross_entropy has
/// one) added to the last layer's. Each stage's `cost` still sums its layers' own.
template <model_type Model, std::size_t S, class Loss>
consteval stage_plan<S> partition(double boundary_cost = 0.0, double cost_per_byte = 0.0) {
  constexpr bool declared = requires { requires std::is_convertible_v<decltype(Loss::cost), double>; };
  static_assert(declared,
                "ctpipe::partition<Model, S, Loss>: Loss needs a declared cost (static constexpr double cost) to be "
                "counted on the last stage");
  std::array<double, Model::size> c = Model::costs;
  if constexpr (declared) c[Model::size - 1] += static_cast<double>(Loss::cost);
  stage_plan<S> p = detail::partition_by<Model, S>(c, boundary_cost, cost_per_byte);
  for (int s = 0; s < static_cast<int>(S) && !p.refused; ++s)
    p.cost[static_cast<std::size_t>(s)] = detail::sum_costs(Model::costs, p.begin(s), p.end(s));
  return p;
}

namespace detail {
// The share of a layer's work that its forward is, where backward = 2 x forward: a frozen layer
// (forward only) loads its stage with a third of its declared cost.
inline constexpr double forward_share = 1.0 / 3.0;
}  // namespace detail

/// The stages of Model with its first `Frozen` layers frozen (PipeTransformer): the active layers
/// [Frozen, L) balanced into S stages, stage 0 also loaded with the frozen prefix at `frozen_load`
/// of its declared cost (forward only). first[0] = Frozen; max_stage_cost counts the prefix's load.
template <model_type Model, std::size_t S>
consteval stage_plan<S> freeze_partition(int frozen, double frozen_load = detail::forward_share) {
  static_assert(S >= 1, "ctpipe::freeze_partition: stages must be at least 1");
  constexpr std::size_t L = Model::size;
  constexpr auto c = Model::costs;
  if (frozen < 0 || static_cast<std::size_t>(frozen) + S > L)
    throw "ctpipe::freeze_partition: frozen must be at least 0 and leave at least one active layer per stage";
  const int active = static_cast<int>(L) - frozen;
  const double prefix = detail::sum_costs(c, 0, frozen);
  std::array<double, L> load{};
  for (int i = 0; i < active; ++i) load[static_cast<std::size_t>(i)] = c[static_cast<std::size_t>(frozen + i)];
  load[0] += frozen_load * prefix;
  stage_plan<S> p{};
  p.max_stage_cost = detail::balance(load.data(), active, static_cast<int>(S), 0.0, p.first.data());
  for (auto& f : p.first) f += frozen;
  for (int s = 0; s < static_cast<int>(S); ++s)
    p.cost[static_cast<std::size_t>(s)] = detail::sum_costs(c, p.begin(s), p.end(s));
  p.frozen_cost = prefix;
  return p;
}

/// Stages from explicit boundaries: stage s holds layers [Bounds[s], Bounds[s + 1]). The first
/// boundary must be 0, the last the number of layers, and they must increase strictly.
template <model_type Model, int... Bounds>
consteval stage_plan<sizeof...(Bounds) - 1> stage_bounds() {
  static_assert(sizeof...(Bounds) >= 2,
                "ctpipe::stage_bounds: give at least two boundaries (0 and the number of layers)");
  constexpr std::array<int, sizeof...(Bounds)> b{Bounds...};
  static_assert(b[0] == 0, "ctpipe::stage_bounds: the first boundary must be 0");
  static_assert(b[sizeof...(Bounds) - 1] == static_cast<int>(Model::size),
                "ctpipe::stage_bounds: the last boundary must be the number of layers");
  static_assert(
      [&] {
        for (std::size_t i = 1; i < b.size(); ++i)
          if (b[i] <= b[i - 1]) return false;
        return true;
      }(),
      "ctpipe::stage_bounds: boundaries must increase strictly (every stage needs at least one layer)");
  stage_plan<sizeof...(Bounds) - 1> p{};
  p.first = b;
  detail::fill_costs(p, Model::costs, 0.0);
  return p;
}

/// A cost model for the analysis from a stage plan's declared costs: forward = the stage's cost
/// (stage 0: with its frozen prefix), backward = `backward_ratio` x that (without), and `comm` per message. Use it to
/// static_assert the figures of the schedule as it will run these stages.
template <std::size_t S>
constexpr stage_costs<S> costs_of(const stage_plan<S>& p, double backward_ratio = 2.0, double comm = 0.0) {
  stage_costs<S> c{};
  for (std::size_t s = 0; s < S; ++s) {
    c.forward[s] = p.cost[s];
    c.backward[s] = backward_ratio * p.cost[s];
    c.backward_input[s] = 0.5 * backward_ratio * p.cost[s];
    c.backward_weight[s] = 0.5 * backward_ratio * p.cost[s];
  }
  if constexpr (S > 0) c.forward[0] += p.frozen_cost;  // the frozen prefix: forward only
  c.comm = comm;
  return c;
}

}  // namespace ctpipe
