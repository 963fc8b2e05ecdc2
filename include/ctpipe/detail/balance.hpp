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
  buffer<double> prefix_buf(L + 1);  // prefix[j]: the first j costs' sum
  double* prefix = prefix_buf.data();
  for (std::size_t j = 0; j < L; ++j) prefix[j + 1] = prefix[j] + costs[j];
  buffer<double> best((S + 1) * (L + 1), inf);  // best[k][j]: smallest largest element, j layers in k parts
  buffer<int> cut((S + 1) * (L + 1));           // where the k-th part starts in that optimum
  double* b = best.data();
  int* c = cut.data();
  b[0] = 0.0;
  // The last part is [i, j): its cost falls as i grows, best[k - 1][i] rises, so the optimum is where
  // they cross (a binary search), and the smallest i with the optimal value is the first i whose
  // part costs no more than it (another). Costs are >= 0.
  for (std::size_t k = 1; k <= S; ++k) {
    const double* prev = b + (k - 1) * (L + 1);
    for (std::size_t j = k; j <= L; ++j) {
      auto value = [&](std::size_t i) {
        double v = prev[i];
        const double part = prefix[j] - prefix[i];
        if (part > v) v = part;
        if (k > 1 && boundary_cost > v) v = boundary_cost;
        return v;
      };
      // The first i in [k - 1, j - 1] where prev[i] >= the part [i, j).
      std::size_t lo = k - 1, hi = j - 1;
      while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (prev[mid] >= prefix[j] - prefix[mid])
          hi = mid;
        else
          lo = mid + 1;
      }
      double v = value(lo);
      if (lo > k - 1 && value(lo - 1) <= v) v = value(lo - 1);
      // The first i whose part is within v (all before it cost more; it and all after, no more).
      std::size_t a = k - 1, z = j - 1;
      while (a < z) {
        const std::size_t mid = a + (z - a) / 2;
        if (prefix[j] - prefix[mid] <= v)
          z = mid;
        else
          a = mid + 1;
      }
      b[k * (L + 1) + j] = value(a);
      c[k * (L + 1) + j] = static_cast<int>(a);
    }
  }
  first[S] = layers;
  for (std::size_t k = S, j = L; k >= 1; --k) {
    first[k - 1] = c[k * (L + 1) + j];
    j = static_cast<std::size_t>(c[k * (L + 1) + j]);
  }
  return b[S * (L + 1) + L];
}

/// Like balance(), where each part [i, j) but the last also costs send[i * (layers + 1) + j], as a
/// pipeline element of its own (what the part sends on: its activations and its skip connections'
/// tensors): the largest of the parts' sums and their sends is minimised. A straight dynamic
/// program (parts x layers^2: the sends need not fall as a part grows). Among equal optima the one
/// with the earliest boundaries is taken. Writes first[0..parts] and returns the largest element.
constexpr double balance_with_sends(const double* costs, int layers, int parts, const double* send, int* first) {
  const auto L = static_cast<std::size_t>(layers), S = static_cast<std::size_t>(parts);
  constexpr double inf = 1e300;
  buffer<double> prefix_buf(L + 1);
  double* prefix = prefix_buf.data();
  for (std::size_t j = 0; j < L; ++j) prefix[j + 1] = prefix[j] + costs[j];
  buffer<double> best((S + 1) * (L + 1), inf);
  buffer<int> cut((S + 1) * (L + 1));
  double* b = best.data();
  int* c = cut.data();
  b[0] = 0.0;
  for (std::size_t k = 1; k <= S; ++k)
    for (std::size_t j = k; j <= L; ++j)
      for (std::size_t i = k - 1; i < j; ++i) {
        double v = b[(k - 1) * (L + 1) + i];
        v = prefix[j] - prefix[i] > v ? prefix[j] - prefix[i] : v;
        v = j < L && send[i * (L + 1) + j] > v ? send[i * (L + 1) + j] : v;
        if (v < b[k * (L + 1) + j]) {
          b[k * (L + 1) + j] = v;
          c[k * (L + 1) + j] = static_cast<int>(i);
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
