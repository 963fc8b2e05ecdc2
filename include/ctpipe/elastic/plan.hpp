// PipeTransformer's elastic plan, at compile time (docs/schedules.md): for each freeze
// point the user allows (how many leading layers are frozen), the pipeline length, the data-parallel
// width and the stages, so that switching at run time is choosing a precomputed executor.
//
// AutoPipe's rule: start from `Ranks` stages (nothing frozen) on `Devices` devices (Devices / Ranks
// replicas); at a freeze point, halve the pipeline (8 -> 4 -> 2 -> 1) while the largest stage load
// of the re-partitioned active layers (freeze_partition: the frozen prefix at a third of its cost)
// stays within the starting one, and while the freed devices make whole replicas: the new length
// divides Devices, and the replicas divide the step's microbatches. Where halving breaks either,
// the pipeline keeps its length (the process count change is refused: it cannot be done).
#pragma once

#include <array>
#include <cstddef>

#include <ctpipe/detail/balance.hpp>
#include <ctpipe/model/partition.hpp>

namespace ctpipe {

/// One freeze point of an elastic plan.
struct elastic_point {
  int frozen = 0;        // leading layers frozen
  int ranks = 1;         // pipeline length (stages, one per rank)
  int replicas = 1;      // data-parallel width: devices / ranks
  int microbatches = 1;  // per replica and step: the step's microbatches / replicas
  double max_load = 0;   // the largest stage load (declared costs; the frozen prefix at a third)
  constexpr bool operator==(const elastic_point&) const = default;
};

namespace detail {
// The largest stage load of Model's layers with `frozen` frozen, split into `ranks` stages.
template <class Model>
constexpr double frozen_load(int frozen, int ranks, double share) {
  constexpr auto c = Model::costs;
  const int active = static_cast<int>(Model::size) - frozen;
  std::array<double, Model::size> load{};
  double prefix = 0.0;
  for (int i = 0; i < frozen; ++i) prefix += c[static_cast<std::size_t>(i)];
  for (int i = 0; i < active; ++i) load[static_cast<std::size_t>(i)] = c[static_cast<std::size_t>(frozen + i)];
  load[0] += share * prefix;
  std::array<int, Model::size + 1> first{};
  return balance(load.data(), active, ranks, 0.0, first.data());
}
}  // namespace detail

/// The elastic plan of Model on `Devices` devices, starting as a pipeline of `Ranks` stages, with
/// `Microbatches` microbatches a step (over all replicas), at the freeze points `Points` (a
/// std::array<int, N> of leading-layer counts, increasing, the first 0). `CachedPrefix`: whether the
/// frozen prefix's output comes from the cache (the same samples every epoch: PipeTransformer's
/// AutoCache), so that a frozen layer loads stage 0 with nothing, or runs every step, loading it
/// with a third of its declared cost (its forward).
template <model_type Model, int Devices, int Ranks, int Microbatches, auto Points, bool CachedPrefix = false>
struct elastic_plan {
  /// The share of its declared cost a frozen layer loads stage 0 with.
  static constexpr double frozen_load = CachedPrefix ? 0.0 : detail::forward_share;
  using model_t = Model;
  static constexpr int layers = static_cast<int>(Model::size);
  static constexpr int devices = Devices, start_ranks = Ranks, microbatches = Microbatches;
  static_assert(Ranks >= 1 && Devices >= Ranks && Devices % Ranks == 0,
                "ctpipe::elastic_plan: Ranks must be at least 1 and divide Devices (each replica is a whole pipeline)");
  static_assert(Microbatches % (Devices / Ranks) == 0,
                "ctpipe::elastic_plan: Microbatches must be a multiple of the replicas (Devices / Ranks)");
  static_assert(Ranks <= layers, "ctpipe::elastic_plan: Ranks must be at most the number of layers");
  static_assert(Model::is_chain,
                "ctpipe::elastic_plan: the model is not a chain (a node reads other than the previous layer's whole "
                "output); elastic training freezes prefixes of chains only so far");
  static_assert(Points.size() >= 1 && Points[0] == 0,
                "ctpipe::elastic_plan: the freeze points must start with 0 (nothing frozen)");
  static_assert(
      [] {
        for (std::size_t i = 1; i < Points.size(); ++i)
          if (Points[i] <= Points[i - 1]) return false;
        return true;
      }(),
      "ctpipe::elastic_plan: the freeze points must increase strictly");
  static_assert(Points[Points.size() - 1] + 1 <= layers,
                "ctpipe::elastic_plan: every freeze point must leave at least one layer active");

  static constexpr std::size_t count = Points.size();
  static constexpr std::array<elastic_point, count> points = [] {
    std::array<elastic_point, count> out{};
    const double start = detail::frozen_load<Model>(0, Ranks, frozen_load);
    for (std::size_t i = 0; i < count; ++i) {
      const int f = Points[i];
      int p = Ranks;
      // Active layers fewer than the stages: shorten until each stage has one.
      while (p > layers - f) p /= 2;
      double load = detail::frozen_load<Model>(f, p, frozen_load);
      for (int q = p / 2; q >= 1 && p % 2 == 0; q = p / 2) {
        const double l = detail::frozen_load<Model>(f, q, frozen_load);
        if (l > start || Devices % q != 0 || Microbatches % (Devices / q) != 0) break;
        p = q;
        load = l;
      }
      out[i] = {f, p, Devices / p, Microbatches / (Devices / p), load};
    }
    return out;
  }();
  static_assert(
      [] {
        for (const auto& x : points)
          if (x.ranks < 1 || Devices % x.ranks != 0 || Microbatches % x.replicas != 0) return false;
        return true;
      }(),
      "ctpipe::elastic_plan: a freeze point leaves fewer active layers than can make whole pipelines on these "
      "devices; give fewer freeze points or fewer layers frozen");

  /// The stages of freeze point I: the active layers balanced over its pipeline, the prefix frozen.
  template <std::size_t I>
  static constexpr auto stages = freeze_partition<Model, static_cast<std::size_t>(points[I].ranks)>(points[I].frozen,
                                                                                                    frozen_load);

  /// The freeze point to use for `frozen` layers wanted: the last point at or below it.
  static constexpr std::size_t point_for(int frozen) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (Points[i] <= frozen) k = i;
    return k;
  }
};

}  // namespace ctpipe
