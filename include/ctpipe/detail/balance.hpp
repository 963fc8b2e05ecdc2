// The balanced split of a sequence of costs into contiguous parts: the one dynamic program behind
// partition<Model, S>() (compile time, a model's declared layer costs) and the planner (run time or
// compile time, a model file's layer figures). Plain constexpr, scratch in detail::buffer.
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>

namespace ctpipe::detail {

// The dynamic program's tables: the prefix sums of the costs, best[k][j] (the smallest largest
// element with j layers in k parts) and cut[k][j] (where the k-th part starts in that optimum).
struct balance_tables {
  std::size_t L, S;
  buffer<double> prefix_buf, best;
  buffer<int> cut;
  constexpr balance_tables(const double* costs, int layers, int parts)
      : L(static_cast<std::size_t>(layers)),
        S(static_cast<std::size_t>(parts)),
        prefix_buf(L + 1),
        best((S + 1) * (L + 1), 1e300),
        cut((S + 1) * (L + 1)) {
    for (std::size_t j = 0; j < L; ++j) prefix_buf[j + 1] = prefix_buf[j] + costs[j];
    best[0] = 0.0;
  }
  // Writes first[0..parts] from the cuts of the optimum and returns its largest element.
  constexpr double finish(int* first) const {
    first[S] = static_cast<int>(L);
    for (std::size_t k = S, j = L; k >= 1; --k) {
      first[k - 1] = cut[k * (L + 1) + j];
      j = static_cast<std::size_t>(cut[k * (L + 1) + j]);
    }
    return best[S * (L + 1) + L];
  }
};

/// Splits costs[0..layers) into `parts` contiguous, non-empty parts minimising the largest of the
/// parts' sums and `boundary_cost` (charged once per boundary when parts > 1, as a pipeline element
/// of its own: PipeDream's dynamic program). Among equal optima the one with the earliest
/// boundaries is taken. Writes first[0..parts] (part k holds [first[k], first[k + 1])) and returns
/// the largest element. Needs 1 <= parts <= layers.
constexpr double balance(const double* costs, int layers, int parts, double boundary_cost, int* first) {
  balance_tables tab(costs, layers, parts);
  const std::size_t L = tab.L, S = tab.S;
  const double* prefix = tab.prefix_buf.data();  // prefix[j]: the first j costs' sum
  double* b = tab.best.data();
  int* c = tab.cut.data();
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
  return tab.finish(first);
}

/// Like balance(), where each part [i, j) but the last also costs send[i * (layers + 1) + j], as a
/// pipeline element of its own (what the part sends on: its activations and its skip connections'
/// tensors): the largest of the parts' sums and their sends is minimised. A straight dynamic
/// program (parts x layers^2: the sends need not fall as a part grows). Among equal optima the one
/// with the earliest boundaries is taken. Writes first[0..parts] and returns the largest element.
constexpr double balance_with_sends(const double* costs, int layers, int parts, const double* send, int* first) {
  balance_tables tab(costs, layers, parts);
  const std::size_t L = tab.L, S = tab.S;
  const double* prefix = tab.prefix_buf.data();
  double* b = tab.best.data();
  int* c = tab.cut.data();
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
  return tab.finish(first);
}

}  // namespace ctpipe::detail
