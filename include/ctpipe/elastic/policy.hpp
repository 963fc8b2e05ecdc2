// When to freeze (PipeTransformer's AutoFreeze, shared/SCHEDULES.md part 2): policies an elastic
// trainer asks at the end of each epoch how many leading layers to freeze. A policy is any callable
// int(const freeze_signal&); these two are the paper's. Both never unfreeze. Plain C++: no threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace ctpipe {

/// What a freezing policy sees at the end of an epoch.
struct freeze_signal {
  int epoch = 0;   // epochs ended, this one included (1 after the first)
  int layers = 0;  // layers of the model
  int frozen = 0;  // leading layers frozen now
  /// Per layer: the norm of its gradient summed over this epoch's steps, and over the previous
  /// epoch's (empty before the second epoch). Frozen layers and layers without parameters: 0.
  std::span<const double> gradient_norm{};
  std::span<const double> previous_gradient_norm{};
};

/// AutoFreeze's default schedule: ceil(L * (1 - (1 - alpha)^T)) layers frozen by epoch T.
struct geometric_freezing {
  double alpha = 0.1;
  int operator()(const freeze_signal& s) const {
    const double share = 1.0 - std::pow(1.0 - alpha, static_cast<double>(s.epoch));
    const int n = static_cast<int>(std::ceil(static_cast<double>(s.layers) * share - 1e-9));
    return std::max(s.frozen, std::min(n, s.layers));
  }
};

/// AutoFreeze's adaptive rule: the change ratio of each active layer's gradient norm,
/// |now - before| / before, against the median of the active layers' ratios; the layers before the
/// first active layer whose ratio reaches the median are frozen (they changed least). Nothing moves
/// before the second epoch, or where a norm is 0 (no parameters: such a layer goes along with the
/// layers around it, never stopping the freeze).
struct adaptive_freezing {
  int operator()(const freeze_signal& s) const {
    if (s.previous_gradient_norm.size() != static_cast<std::size_t>(s.layers) ||
        s.gradient_norm.size() != static_cast<std::size_t>(s.layers))
      return s.frozen;
    std::vector<double> ratio(static_cast<std::size_t>(s.layers), -1.0);  // -1: no gradient
    std::vector<double> active;
    for (int l = s.frozen; l < s.layers; ++l) {
      const double before = s.previous_gradient_norm[static_cast<std::size_t>(l)];
      if (before > 0.0) {
        ratio[static_cast<std::size_t>(l)] = std::abs(s.gradient_norm[static_cast<std::size_t>(l)] - before) / before;
        active.push_back(ratio[static_cast<std::size_t>(l)]);
      }
    }
    if (active.empty()) return s.frozen;
    std::sort(active.begin(), active.end());
    const std::size_t n = active.size();
    const double median = n % 2 == 1 ? active[n / 2] : 0.5 * (active[n / 2 - 1] + active[n / 2]);
    int l = s.frozen;
    while (l < s.layers && ratio[static_cast<std::size_t>(l)] < median) ++l;
    return std::max(s.frozen, l);
  }
};

}  // namespace ctpipe
