// Uneven work: costs that differ per microbatch (variable-length sequences are the common case).
// microbatch_scaled wraps any cost model and multiplies the cost of a microbatch's ops by that
// microbatch's factor (extent_factors makes them from a step's extents); the simulation, the
// pictures, the explorer, the planner and compare_measured take it as they take any cost model.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include <ctpipe/analysis/analyse.hpp>

namespace ctpipe {

/// `base`'s costs with microbatch i's compute ops scaled by factor[i] (1 past the end of `factor`).
/// Messages keep `base`'s time unless `scale_messages` is set (activations that grow with the
/// sequence). An overlapped pair F&B keeps `base`'s ratio of pair to parts.
template <cost_function C>
struct microbatch_scaled {
  C base{};
  std::span<const double> factor{};
  bool scale_messages = false;
  double comm = base.comm;

  constexpr double of(int microbatch) const {
    return microbatch >= 0 && static_cast<std::size_t>(microbatch) < factor.size()
               ? factor[static_cast<std::size_t>(microbatch)]
               : 1.0;
  }
  constexpr double operator()(const task& t) const { return of(t.microbatch) * static_cast<double>(base(t)); }
  constexpr double pair(const task& f, const task& b) const {
    const double parts = static_cast<double>(base(f)) + static_cast<double>(base(b));
    const double ratio = parts > 0.0 ? detail::pair_cost(base, f, b) / parts : 1.0;
    return ratio * ((*this)(f) + (*this)(b));
  }
  constexpr double message(const task& send) const {
    return (scale_messages ? of(send.microbatch) : 1.0) * detail::message_cost(base, send);
  }
};

/// The factors of microbatch_scaled for a step whose microbatch i uses extents[i] of `capacity`
/// tokens (ctpipe/model/extent.hpp): x = extent / capacity, and the factor (1 - quadratic) x +
/// quadratic x^2, where `quadratic` is the share of a full microbatch's time that grows with the
/// square of its length (attention's scores; 0 for layers that work token by token).
inline std::vector<double> extent_factors(std::span<const int> extents, std::size_t capacity, double quadratic = 0.0) {
  if (capacity == 0) throw std::invalid_argument("ctpipe::extent_factors: the capacity must be at least 1 token");
  if (quadratic < 0.0 || quadratic > 1.0)
    throw std::invalid_argument("ctpipe::extent_factors: the quadratic share must be within [0, 1]");
  std::vector<double> f;
  f.reserve(extents.size());
  for (const int e : extents) {
    const double x = static_cast<double>(e) / static_cast<double>(capacity);
    f.push_back((1.0 - quadratic) * x + quadratic * x * x);
  }
  return f;
}

template <cost_function C, class Factors>
microbatch_scaled(C, const Factors&) -> microbatch_scaled<C>;
template <cost_function C, class Factors>
microbatch_scaled(C, const Factors&, bool) -> microbatch_scaled<C>;

}  // namespace ctpipe
