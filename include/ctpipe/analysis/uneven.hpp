// Uneven work: costs that differ per microbatch (variable-length sequences are the common case).
// microbatch_scaled wraps any cost model and multiplies the cost of a microbatch's ops by that
// microbatch's factor; the simulation, the pictures, the explorer and the planner take it as they
// take any cost model.
#pragma once

#include <cstddef>
#include <span>

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

template <cost_function C, class Factors>
microbatch_scaled(C, const Factors&) -> microbatch_scaled<C>;
template <cost_function C, class Factors>
microbatch_scaled(C, const Factors&, bool) -> microbatch_scaled<C>;

}  // namespace ctpipe
