// The balanced split of a sequence of costs into contiguous parts: the one dynamic program behind
// partition<Model, S>() (compile time, a model's declared layer costs) and the planner (run time or
// compile time, a model file's layer figures). Plain constexpr, scratch in detail::buffer.
#pragma once

#include <ctpipe/detail/buffer.hpp>

namespace ctpipe::detail {

/// Splits costs[0..layers) into `parts` contiguous, non-empty parts minimising the largest of the
/// parts' sums and `boundary_cost` (charged once per boundary when parts > 1, as a pipeline element
/// of its own: PipeDream's dynamic program). Among equal optima the one with the earliest
/// boundaries is taken. Writes first[0..parts] (part k holds [first[k], first[k + 1])) and returns
/// the largest element. Needs 1 <= parts <= layers.
constexpr double balance(const double* costs, int layers, int parts, double boundary_cost, int* first) {
  const auto L = static_cast<std::size_t>(layers), S = static_cast<std::size_t>(parts);
  constexpr double inf = 1e300;
  buffer<double> best((S + 1) * (L + 1), inf);  // best[k][j]: smallest largest element, j layers in k parts
  buffer<int> cut((S + 1) * (L + 1));           // where the k-th part starts in that optimum
  double* b = best.data();
  int* c = cut.data();
  b[0] = 0.0;
  for (std::size_t k = 1; k <= S; ++k)
    for (std::size_t j = k; j <= L; ++j) {
      double part = 0.0;
      // The last part is [i, j): walk i down from j - 1, growing its sum; on a tie the smaller i wins.
      for (std::size_t i = j; i-- > k - 1;) {
        part += costs[i];
        if (b[(k - 1) * (L + 1) + i] >= inf) continue;
        double v = b[(k - 1) * (L + 1) + i];
        if (part > v) v = part;
        if (k > 1 && boundary_cost > v) v = boundary_cost;
        if (v <= b[k * (L + 1) + j]) {
          b[k * (L + 1) + j] = v;
          c[k * (L + 1) + j] = static_cast<int>(i);
        }
      }
    }
  first[S] = layers;
  for (std::size_t k = S, j = L; k >= 1; --k) {
    first[k - 1] = c[k * (L + 1) + j];
    j = static_cast<std::size_t>(c[k * (L + 1) + j]);
  }
  return b[S * (L + 1) + L];
}

}  // namespace ctpipe::detail
