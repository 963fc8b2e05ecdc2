// Optimizer rules: how one parameter tensor is updated from its gradient and the state the rule
// keeps for it. A rule is a small struct of hyperparameters with
//
//   static constexpr std::array<std::string_view, N> state_names{...};   // N state tensors, N >= 0
//   template <class T>
//   void operator()(const ctpipe::update_info& u, std::span<T> w, std::span<const T> g,
//                   std::span<T> s0, ..., std::span<T> sN-1) const;
//
// where each state tensor has w's length and starts at zero. ctpipe::optimizer (optim/optimizer.hpp)
// allocates the state once and calls the rule per tensor; a user's rule fits the same way. A rule
// may also have an element form (element_rule below: the scalars of a tensor's update, and a
// per-element function for host and device), which the device optimizer needs; the built-in rules
// have one, and their span form runs it in a loop. The rules here follow PyTorch's torch.optim definitions (SGD, Adam,
// AdamW), element by element in index order, in the parameters' own type with the scalars rounded to it once per call:
// the same bits on every executor and in the sequential reference (not PyTorch's bits: its kernels fuse and reorder).
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

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE
#include <ctpipe/model/model.hpp>
#include <ctpipe/optim/rounded.hpp>

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

namespace detail {
template <class R, class T>
using scalars_of = decltype(std::declval<const R&>().template prepare<T>(std::declval<const update_info&>()));
template <class R, class T, std::size_t... I>
constexpr bool has_element(std::index_sequence<I...>) {
  return requires(const scalars_of<R, T>& s, T& w, T g) { R::element(s, w, g, (static_cast<void>(I), w)...); };
}
}  // namespace detail

/// A rule with an element form, which runs on the device (ctpipe::cuda::device_optimizer) as well
/// as on the host: `prepare<T>(u)` gives the scalars of one tensor's update (computed on the host,
/// in double, rounded to T once: learning rate, bias corrections...), a trivially copyable struct;
/// the static `element(scalars, w, g, s0, ..., sN-1)`, CTPIPE_HOST_DEVICE, updates one element
/// (w and the state by reference, g by value), with ctpipe::rn's operations (optim/rounded.hpp) so
/// that a kernel and the host loop round alike. The built-in rules have one, and their span form
/// is the element form in a loop (apply_elements).
template <class R, class T>
concept element_rule = detail::has_state_names<R> && requires(const R& r, const update_info& u) {
  r.template prepare<T>(u);
} && std::is_trivially_copyable_v<detail::scalars_of<R, T>> && detail::has_element<R, T>(
    std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(R::state_names)>>>{});

/// The element form of rule r over a tensor, element by element in index order: its span form.
/// Scalars with a `decays` flag (the built-in rules' weight decay) get a loop for each value of
/// it, in which the compiler knows it: the element's branch on it then costs nothing on the host
/// (it cost SGD 10% as a branch in the one loop; a kernel's threads all take the same side).
template <class R, class T, class... S>
void apply_elements(const R& r, const update_info& u, std::span<T> w, std::span<const T> g, std::span<S>... s) {
  const auto k = r.template prepare<T>(u);
  const auto each = [&](const auto& scalars) {
    for (std::size_t i = 0; i < w.size(); ++i) R::element(scalars, w[i], g[i], s[i]...);
  };
  if constexpr (requires { bool(k.decays); }) {
    if (k.decays)
      each(k);
    else
      each(k);
  } else {
    each(k);
  }
}

/// Plain SGD: w -= lr x (g + weight_decay x w). No state. Also callable in the asynchronous
/// executor's older form, opt(layer, w, g).
struct sgd {
  double lr = 0.01;
  double weight_decay = 0.0;
  static constexpr std::array<std::string_view, 0> state_names{};

  template <class T>
  struct scalars {
    T rate, decay;
    bool decays;
  };
  template <class T>
  scalars<T> prepare(const update_info&) const {
    return {static_cast<T>(lr), static_cast<T>(weight_decay), weight_decay != 0.0};
  }
  template <class T>
  CTPIPE_HOST_DEVICE static void element(const scalars<T>& s, T& w, T g) {
    w = rn::sub(w, rn::mul(s.rate, s.decays ? rn::add(g, rn::mul(s.decay, w)) : g));
  }
  template <class T>
  void operator()(const update_info& u, std::span<T> w, std::span<const T> g) const {
    apply_elements(*this, u, w, g);
  }
  template <class T, class G>
  void operator()(std::size_t /*layer*/, std::span<T> w, std::span<G> g) const {
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
  struct scalars {
    T rate, mu, keep, decay;
    bool decays, first, nesterov;
  };
  template <class T>
  scalars<T> prepare(const update_info& u) const {
    return {static_cast<T>(lr),
            static_cast<T>(momentum),
            static_cast<T>(1.0 - dampening),
            static_cast<T>(weight_decay),
            weight_decay != 0.0,
            u.step == 1,
            nesterov};
  }
  template <class T>
  CTPIPE_HOST_DEVICE static void element(const scalars<T>& s, T& w, T g, T& b) {
    const T d = s.decays ? rn::add(g, rn::mul(s.decay, w)) : g;
    b = s.first ? d : rn::add(rn::mul(s.mu, b), rn::mul(s.keep, d));
    w = rn::sub(w, rn::mul(s.rate, s.nesterov ? rn::add(d, rn::mul(s.mu, b)) : b));
  }
  template <class T>
  void operator()(const update_info& u, std::span<T> w, std::span<const T> g, std::span<T> b) const {
    apply_elements(*this, u, w, g, b);
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
  struct scalars {
    T step_size, root_correction, b1, b2, c1, c2, eps, decay, shrink;
    bool decays;
  };
  // The bias corrections of update t, in double, rounded once.
  template <class T>
  scalars<T> prepare(const update_info& u) const {
    const double t = static_cast<double>(u.step);
    return {static_cast<T>(lr / (1.0 - std::pow(beta1, t))),
            static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t))),
            static_cast<T>(beta1),
            static_cast<T>(beta2),
            static_cast<T>(1.0 - beta1),
            static_cast<T>(1.0 - beta2),
            static_cast<T>(eps),
            static_cast<T>(weight_decay),
            static_cast<T>(1.0 - lr * weight_decay),
            weight_decay != 0.0};
  }
  template <class T>
  CTPIPE_HOST_DEVICE static void element(const scalars<T>& s, T& w, T g, T& m, T& v) {
    T d = g;
    if constexpr (Decoupled) {
      if (s.decays) w = rn::mul(w, s.shrink);
    } else {
      if (s.decays) d = rn::add(d, rn::mul(s.decay, w));
    }
    m = rn::add(rn::mul(s.b1, m), rn::mul(s.c1, d));
    v = rn::add(rn::mul(s.b2, v), rn::mul(s.c2, rn::mul(d, d)));
    const T denom = rn::add(rn::div(rn::sqrt(v), s.root_correction), s.eps);
    w = rn::sub(w, rn::mul(s.step_size, rn::div(m, denom)));
  }
  template <class T>
  void operator()(const update_info& u, std::span<T> w, std::span<const T> g, std::span<T> m, std::span<T> v) const {
    apply_elements(*this, u, w, g, m, v);
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
