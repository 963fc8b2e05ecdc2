// Optimizer rules: how one parameter tensor is updated from its gradient and the state the rule
// keeps for it. A rule is a small struct of hyperparameters with
//
//   static constexpr std::array<std::string_view, N> state_names{...};   // N state tensors, N >= 0
//   template <class T>
//   void operator()(const ctpipe::update_info& u, std::span<T> w, std::span<const T> g,
//                   std::span<T> s0, ..., std::span<T> sN-1) const;
//
// where each state tensor has w's length and starts at zero. ctpipe::optimizer (optim/optimizer.hpp)
// allocates the state once and calls the rule per tensor; a user's rule fits the same way. The
// rules here follow PyTorch's torch.optim definitions (SGD, Adam, AdamW), element by element in
// index order, in the parameters' own type with the scalars rounded to it once per call: the same
// bits on every executor and in the sequential reference (not PyTorch's bits: its kernels fuse and
// reorder).
#pragma once

#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include <ctpipe/model/model.hpp>

namespace ctpipe {

/// What a rule learns about the update it makes: the model's layer, the tensor's name, and the
/// number of updates this tensor has had, this one included (1 at the first).
struct update_info {
  std::size_t layer = 0;
  std::string_view tensor;
  std::uint64_t step = 1;
};

namespace detail {
template <class R, class T, std::size_t... I>
constexpr bool applies_with(std::index_sequence<I...>) {
  return requires(const R& r, const update_info& u, std::span<T> w, std::span<const T> g) {
    r(u, w, g, (static_cast<void>(I), w)...);
  };
}
template <class R>
concept has_state_names = requires {
  { R::state_names.size() } -> std::convertible_to<std::size_t>;
  { R::state_names[0] } -> std::convertible_to<std::string_view>;
}
|| requires { requires std::tuple_size<std::remove_cvref_t<decltype(R::state_names)>>::value == 0; };
}  // namespace detail

/// A rule that updates tensors of element type T (see the top of this file).
template <class R, class T>
concept optimizer_rule = detail::has_state_names<R> && detail::applies_with<R, T>(
    std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(R::state_names)>>>{});

/// The number of state tensors rule R keeps per parameter tensor.
template <class R>
inline constexpr std::size_t state_count_v = std::tuple_size_v<std::remove_cvref_t<decltype(R::state_names)>>;

/// Plain SGD: w -= lr x (g + weight_decay x w). No state. Also callable in the asynchronous
/// executor's older form, opt(layer, w, g).
struct sgd {
  double lr = 0.01;
  double weight_decay = 0.0;
  static constexpr std::array<std::string_view, 0> state_names{};

  template <class T>
  constexpr void operator()(const update_info&, std::span<T> w, std::span<const T> g) const {
    const T rate = static_cast<T>(lr), decay = static_cast<T>(weight_decay);
    if (weight_decay == 0.0) {
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= rate * g[i];
    } else {
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= rate * (g[i] + decay * w[i]);
    }
  }
  template <class T, class G>
  constexpr void operator()(std::size_t /*layer*/, std::span<T> w, std::span<G> g) const {
    (*this)(update_info{}, w, std::span<const T>(g.data(), g.size()));
  }
};

/// SGD with momentum (torch.optim.SGD with momentum > 0): d = g + weight_decay x w; the buffer b is
/// d at the first update, momentum x b + (1 - dampening) x d after; w -= lr x (d + momentum x b)
/// with nesterov, lr x b without. State: "momentum_buffer".
struct sgd_momentum {
  double lr = 0.01;
  double momentum = 0.9;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  static constexpr std::array<std::string_view, 1> state_names{"momentum_buffer"};

  template <class T>
  void operator()(const update_info& u, std::span<T> w, std::span<const T> g, std::span<T> b) const {
    const T rate = static_cast<T>(lr), mu = static_cast<T>(momentum), keep = static_cast<T>(1.0 - dampening),
            decay = static_cast<T>(weight_decay);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const T d = weight_decay == 0.0 ? g[i] : g[i] + decay * w[i];
      b[i] = u.step == 1 ? d : mu * b[i] + keep * d;
      w[i] -= rate * (nesterov ? d + mu * b[i] : b[i]);
    }
  }
};

/// Adam (Decoupled = false: torch.optim.Adam, weight decay added to the gradient) and AdamW
/// (Decoupled = true: torch.optim.AdamW, w x= 1 - lr x weight_decay first). With m, v the state:
/// m = beta1 x m + (1 - beta1) x g, v = beta2 x v + (1 - beta2) x g x g,
/// w -= (lr / (1 - beta1^t)) x m / (sqrt(v) / sqrt(1 - beta2^t) + eps), t the tensor's update count.
/// State: "exp_avg" (m), "exp_avg_sq" (v).
template <bool Decoupled>
struct basic_adam {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = Decoupled ? 1e-2 : 0.0;
  static constexpr std::array<std::string_view, 2> state_names{"exp_avg", "exp_avg_sq"};

  template <class T>
  void operator()(const update_info& u, std::span<T> w, std::span<const T> g, std::span<T> m, std::span<T> v) const {
    const double t = static_cast<double>(u.step);
    const T step_size = static_cast<T>(lr / (1.0 - std::pow(beta1, t)));
    const T root_correction = static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t)));
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), c1 = static_cast<T>(1.0 - beta1),
            c2 = static_cast<T>(1.0 - beta2), e = static_cast<T>(eps), decay = static_cast<T>(weight_decay),
            shrink = static_cast<T>(1.0 - lr * weight_decay);
    for (std::size_t i = 0; i < w.size(); ++i) {
      T d = g[i];
      if constexpr (Decoupled) {
        if (weight_decay != 0.0) w[i] *= shrink;
      } else {
        if (weight_decay != 0.0) d += decay * w[i];
      }
      m[i] = b1 * m[i] + c1 * d;
      v[i] = b2 * v[i] + c2 * (d * d);
      const T denom = std::sqrt(v[i]) / root_correction + e;
      w[i] -= step_size * (m[i] / denom);
    }
  }
};
using adam = basic_adam<false>;
using adamw = basic_adam<true>;

/// Plain SGD on a whole model: parameter -= rate x gradient (host layers; a device model goes
/// through its executor: ctpipe::optimizer opt(model, exec, ctpipe::sgd{rate})). ctpipe::optimizer
/// does this with state, clipping, and across processes.
template <model_type M>
constexpr void sgd_step(M& m, double rate) {
  static_assert(!has_device_layer_v<M>,
                "ctpipe::sgd_step: the model has device layers, whose parameters are in device memory; update them "
                "with ctpipe::optimizer opt(model, exec, ctpipe::sgd{rate}) through their executor, or with a kernel");
  const sgd opt{rate};
  for_each_parameter(m, [&opt](auto w, auto g) { opt(0, w, g); });
}

}  // namespace ctpipe
