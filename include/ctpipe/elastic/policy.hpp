// When to freeze (PipeTransformer's AutoFreeze, docs/schedules.md): policies an elastic
// trainer asks at the end of each epoch how many leading layers to freeze. A policy is any callable
// int(const freeze_signal&); these two are the paper's. Both never unfreeze. Plain C++: no threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
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

namespace detail {

/// What an elastic trainer (threads or processes) keeps between epochs for its policy: the epoch
/// count and each layer's gradient norms, this epoch's and the last. One source for both trainers.
class freeze_record {
 public:
  explicit freeze_record(int layers) : layers_(layers), norm_(static_cast<std::size_t>(layers)), previous_(norm_) {}

  /// Adds the norm of one step's (summed) gradient g of layer k to this epoch's.
  template <class T>
  void add(std::size_t k, std::span<T> g) {
    double sq = 0.0;
    for (const auto x : g) sq += static_cast<double>(x) * static_cast<double>(x);
    norm_[k] += std::sqrt(sq);
  }
  /// This epoch's norms (a trainer over processes sums them across processes before ask()).
  std::span<double> norms() noexcept { return norm_; }
  int epoch() const noexcept { return epoch_; }

  /// Ends the epoch: the layers `policy` wants frozen (within [frozen, layers - 1]); the norms
  /// move to the last epoch's.
  template <class Policy>
  int ask(Policy&& policy, int frozen) {
    ++epoch_;
    const freeze_signal s{epoch_, layers_, frozen, norm_,
                          epoch_ > 1 ? std::span<const double>(previous_) : std::span<const double>()};
    const int want = std::clamp(static_cast<int>(policy(s)), frozen, layers_ - 1);
    previous_ = norm_;
    std::fill(norm_.begin(), norm_.end(), 0.0);
    return want;
  }

  /// Throws where `count` layers frozen cannot be: fewer than now (frozen layers stay frozen), or all.
  void check(const char* who, int count, int frozen) const {
    if (count < frozen || count >= layers_)
      throw std::invalid_argument(std::string(who) + ": layers (" + std::to_string(count) +
                                  ") must be at least the layers frozen now (" + std::to_string(frozen) +
                                  ": frozen layers stay frozen) and below the number of layers (" +
                                  std::to_string(layers_) + ")");
  }

 private:
  int layers_ = 0, epoch_ = 0;
  std::vector<double> norm_, previous_;
};

}  // namespace detail

}  // namespace ctpipe
