// An optimizer with state: a rule (optim/rules.hpp) applied to every parameter tensor of a model,
// with the rule's state allocated once, at construction, and global gradient clipping.
//
//   ctpipe::optimizer opt(model, ctpipe::adamw{.lr = 3e-4}, {.max_norm = 1.0});
//   for (...) {
//     exec.step(inputs, targets);   // the gradients are in the model's layers
//     opt.step();                   // clip by the global norm, then update every tensor
//   }
//
// step() computes the global norm of the gradients in one fixed order: each layer's sum of
// squares (in double, in blocks of 1,024 elements in index order, then those blocks' sums likewise:
// optim/detail/norm_order.hpp, the device optimizer's order too), then those sums added in layer
// order, then the square root. A shared parameter counts once: a shared
// group's later members leave out what they share. Where the norm exceeds max_norm every gradient
// is multiplied by max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_ does; where it is
// not finite (a NaN or an infinity anywhere) the step is skipped, parameters, state and update
// counts untouched.
//
// A model split across processes gives its executor as a second argument
// (`ctpipe::optimizer opt(model, exec, rule, clip)`, ctpipe::mpi::executor): each process then
// holds state for its own layers only, and the per-layer sums meet in one all-reduce per step (of
// one double per layer, and one more), to which each layer's sum is given by exactly one process,
// so that every process adds the same numbers in the same order and takes the same decision. The
// other holders of a layer (its data-parallel replicas, a bidirectional table's second copy) add
// a sum that is not finite to the last element: a NaN in any process's gradient skips the step on
// every process. step() is then collective.
//
// A model of device layers (the CUDA executor, the NCCL executor, the MPI executor's device path)
// gives its executor too (`ctpipe::optimizer opt(model, exec, rule, clip)`), and the update runs on
// the host, as an offloaded optimizer does: step() copies the gradients and the parameters of the
// layers this process holds into host memory of its own, on the stream of the rank that runs each
// layer, computes the norm, clips and applies the rule there, in the same order as for a host
// model, and copies the parameters back (the gradients too where they were clipped), waiting for
// the copies before it returns. The optimizer's state lives in host memory. Call it between steps,
// after wait() (a step in flight is a std::logic_error).
//
// The asynchronous executor and the elastic trainers call opt(layer, parameters, gradients)
// themselves (on a weight version's copy, or after their replica sum): the same rule and state, per
// layer, without clipping.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>  // CTPIPE_NOINLINE
#include <ctpipe/model/compute_copy.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/parameter_tensors.hpp>
#include <ctpipe/model/shared_parameters.hpp>
#include <ctpipe/optim/detail/norm_order.hpp>
#include <ctpipe/optim/rules.hpp>

namespace ctpipe {

/// Global gradient clipping, and what to do with a gradient that is not finite.
struct clipping {
  /// > 0: where the global gradient norm exceeds it, every gradient is multiplied by
  /// max_norm / (norm + 1e-6). 0: no clipping.
  double max_norm = 0.0;
  /// A NaN or an infinity in any gradient (a global norm that is not finite) skips the step on
  /// every layer and every process.
  bool skip_nonfinite = true;
};

/// What one optimizer::step did.
struct update_result {
  bool applied = true;  // false: skipped, the gradients were not finite
  double norm = 0.0;    // the global gradient norm before clipping (0 where neither clipping nor the check asks for it)
  double scale = 1.0;   // what the gradients were multiplied by (1: not clipped)
};

/// Where the layers of a model split across processes are: whether this process updates layer k,
/// whether it gives layer k's term of the global norm (one process per layer, for the norm to count
/// it once; a checkpoint's tensors are written by that process too), the sum of every process's
/// terms (an all-reduce; every process calls it at once), and whether this process leads (one
/// process does: it writes a checkpoint's header and renames the file).
template <class P>
concept parameter_place = requires(const P& p, std::size_t k, std::span<double> terms) {
  { p.updates_layer(k) } -> std::convertible_to<bool>;
  { p.counts_layer(k) } -> std::convertible_to<bool>;
  { p.leads() } -> std::convertible_to<bool>;
  p.sum_norm_terms(terms);
};

/// The place of a model of device layers (an executor of device layers): it also copies `bytes`
/// of layer k's device memory to host memory and back, each on a stream of the device that holds
/// the layer, and waits for the copies (finish_copies, which throws where a step is in flight).
template <class P>
concept device_parameter_place = parameter_place<P> &&
    requires(const P& p, std::size_t k, void* to, const void* from, std::size_t bytes) {
  p.copy_to_host(k, to, from, bytes);
  p.copy_to_device(k, to, from, bytes);
  p.finish_copies();
};

namespace detail {
struct optimizer_access;
}

namespace detail {

template <class L>
using parameter_element_t = std::remove_cv_t<typename decltype(std::declval<L&>().parameters())::element_type>;

// Whether rule R can update layer L (a layer without parameters: trivially).
template <class R, class L>
constexpr bool rule_fits() {
  if constexpr (has_parameters<L>)
    return optimizer_rule<R, parameter_element_t<L>>;
  else
    return true;
}

// One layer's state: its tensors, the rule's state for them (state j of the layer's values at
// j x size, in the layer's order), its update count, and what of its gradient the norm leaves out
// (a later member's shared part: [skip_from, skip_to)).
template <class L, bool Parameters = has_parameters<L>>
struct layer_state {
  static constexpr bool updates = false;
};
// A device layer's compute copy (model/compute_copy.hpp) is written from host_w into host_c, then
// copied to the device.
template <class L, bool = has_compute_copy<L>>
struct compute_buffer {};
template <class L>
struct compute_buffer<L, true> {
  std::vector<compute_element_t<L>> host_c;
};
// A device layer's values are copied into host_w and host_g, where the update runs.
template <class L>
struct layer_state<L, true> : compute_buffer<L> {
  using value_type = parameter_element_t<L>;
  static constexpr bool updates = true;
  bool held = false;
  std::vector<tensor_slice> tensors;
  std::vector<value_type> state;
  std::size_t size = 0;
  std::uint64_t steps = 0;
  std::size_t skip_from = 0, skip_to = 0;
  std::vector<value_type> host_w, host_g;
};

// What of layer K's gradients the global norm leaves out: a later member of a shared group leaves
// out its shared part, which the group's first layer counts ([from, to); empty for every other
// layer). The host and the device optimizer both ask here.
template <class Model, std::size_t K, class L>
std::pair<std::size_t, std::size_t> norm_skip(L& l) {
  if constexpr (has_shared_parameters_v<Model>) {
    if (Model::shares[K] >= 0) {
      const auto all = l.gradients();
      const auto shared = shared_span_of<true>(l);
      const auto* begin = all.data();
      if (shared.data() < begin || shared.data() + shared.size() > begin + all.size())
        throw std::invalid_argument("ctpipe::optimizer: layer " + std::to_string(K) +
                                    " shares gradients that are not part of its gradients()");
      const auto from = static_cast<std::size_t>(shared.data() - begin);
      return {from, from + shared.size()};
    }
  }
  static_cast<void>(l);
  return {0, 0};
}

// j < n (a function, where n may be a constant 0: nvcc warns of `j < 0` written out).
constexpr bool below(std::size_t j, std::size_t n) { return j < n; }

// f.template operator()<K>() for the K equal to k (nothing where k >= N).
template <std::size_t N, class F>
void with_model_layer(std::size_t k, F&& f) {
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    static_cast<void>(((k == K ? (f.template operator()<K>(), true) : false) || ...));
  }
  (std::make_index_sequence<N>{});
}

}  // namespace detail

/// Rule applied to Model's parameter tensors, with its state (see the top of this file).
template <model_type Model, class Rule>
class optimizer {
  // A model of device layers: the update runs on host copies (see the top of this file).
  static constexpr bool device = has_device_layer_v<Model>;
  static_assert(
      []<std::size_t... K>(std::index_sequence<K...>) {
        return (detail::rule_fits<Rule, typename Model::template layer_type<K>>() && ...);
      }(std::make_index_sequence<Model::size>{}),
      "ctpipe::optimizer: Rule must have static constexpr std::array<std::string_view, N> state_names and "
      "operator()(const ctpipe::update_info&, std::span<T> w, std::span<const T> g, std::span<T> state...) with "
      "one state span per name, for the parameter type T of every layer with parameters");

  static constexpr std::size_t states = state_count_v<Rule>;

  template <class Seq>
  struct tuple_for;
  template <std::size_t... K>
  struct tuple_for<std::index_sequence<K...>> {
    using type = std::tuple<detail::layer_state<typename Model::template layer_type<K>>...>;
  };
  using state_tuple = typename tuple_for<std::make_index_sequence<Model::size>>::type;

  struct whole_model {
    bool updates_layer(std::size_t) const { return true; }
    bool counts_layer(std::size_t) const { return true; }
    bool leads() const { return true; }
    void sum_norm_terms(std::span<double>) const {}
  };
  friend struct detail::optimizer_access;

 public:
  using model_type = Model;
  using rule_type = Rule;

  /// Every layer of `model`, in this process. Allocates the rule's state (zero) for each tensor.
  optimizer(Model& model, Rule rule, clipping clip = {}) : optimizer(model, whole_model{}, rule, clip) {
    static_assert(!device,
                  "ctpipe::optimizer: the model has device layers, whose parameters are in device memory: give its "
                  "executor too, ctpipe::optimizer opt(model, exec, rule, clip), which copies them to the host and "
                  "back");
  }

  /// The layers of `model` that `place` (an executor of a model split across processes, or of
  /// device layers) says this process updates. The place must outlive the optimizer.
  template <parameter_place Place>
  optimizer(Model& model, const Place& place, Rule rule, clipping clip = {})
      : rule(rule), clip(clip), model_(model), terms_(Model::size + 1, 0.0) {
    static_assert(!device || std::is_same_v<Place, whole_model> || device_parameter_place<Place>,
                  "ctpipe::optimizer: the model has device layers, and this place cannot copy them to the host and "
                  "back (copy_to_host, copy_to_device, finish_copies): give the executor of device layers that runs "
                  "the model");
    if constexpr (std::is_same_v<Place, whole_model>) {
      place_ = nullptr;
    } else {
      place_ = &place;
      place_updates_ = [](const void* p, std::size_t k) {
        return static_cast<bool>(static_cast<const Place*>(p)->updates_layer(k));
      };
      place_counts_ = [](const void* p, std::size_t k) {
        return static_cast<bool>(static_cast<const Place*>(p)->counts_layer(k));
      };
      place_sum_ = [](const void* p, std::span<double> t) { static_cast<const Place*>(p)->sum_norm_terms(t); };
      leads_ = static_cast<bool>(place.leads());
      if constexpr (device_parameter_place<Place>) {
        place_copy_ = [](const void* p, std::size_t k, void* to, const void* from, std::size_t bytes, bool to_host) {
          if (to_host)
            static_cast<const Place*>(p)->copy_to_host(k, to, from, bytes);
          else
            static_cast<const Place*>(p)->copy_to_device(k, to, from, bytes);
        };
        place_finish_ = [](const void* p) { static_cast<const Place*>(p)->finish_copies(); };
      }
    }
    each_layer([&]<std::size_t K>(auto& l, auto& st) {
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
        st.held = updates(K);
        st.tensors = tensor_slices(l, K);
        st.size = l.parameters().size();
        scratch_.resize(std::max(scratch_.size(), detail::norm_scratch(st.size)));
        if (st.held) st.state.assign(states * st.size, typename std::remove_cvref_t<decltype(st)>::value_type{});
        if (st.held && device) {
          st.host_w.resize(st.size);
          st.host_g.resize(st.size);
        }
        if constexpr (has_compute_copy<std::remove_cvref_t<decltype(l)>>) {
          if (l.compute_parameters().size() != st.size)
            throw std::invalid_argument(
                "ctpipe::optimizer: layer " + std::to_string(K) + "'s compute_parameters() hold " +
                std::to_string(l.compute_parameters().size()) + " values, its parameters() " + std::to_string(st.size));
          if (st.held && device) st.host_c.resize(st.size);
        }
        std::tie(st.skip_from, st.skip_to) = detail::norm_skip<Model, K>(l);
      }
    });
  }

  optimizer(const optimizer&) = delete;
  optimizer& operator=(const optimizer&) = delete;

  /// The rule: change its hyperparameters between steps (a learning-rate schedule).
  Rule rule;
  /// Clipping and the non-finite check, for the steps that follow.
  clipping clip;

  /// One update of every tensor this process holds: the gradients first multiplied by
  /// `gradient_scale` where it is not 1 (a loss summed over tokens, made a per-token mean:
  /// 1 / token_losses::total_tokens()), the global norm (where clipping or the check asks for it),
  /// the step skipped where it is not finite, the gradients scaled where it exceeds max_norm, then
  /// the rule on each tensor in layer order. Collective where a place was given.
  update_result step(double gradient_scale = 1.0) {
    update_result r;
    stage_in(true, true);  // (a device model: its values into host memory)
    if (gradient_scale != 1.0) scale_gradients(gradient_scale);
    if (clip.max_norm > 0.0 || clip.skip_nonfinite) {
      r.norm = norm_of_staged();
      if (!std::isfinite(r.norm) && clip.skip_nonfinite) {
        r.applied = false;
        return r;
      }
      if (clip.max_norm > 0.0 && r.norm > clip.max_norm) {
        r.scale = clip.max_norm / (r.norm + 1e-6);
        scale_gradients(r.scale);
      }
    }
    each_layer([&]<std::size_t K>(auto& l, auto& st) {
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
        if (st.held) {
          const auto g = gradients_of(l, st);
          apply(K, st, parameters_of(l, st),
                std::span<const typename std::remove_cvref_t<decltype(st)>::value_type>(g.data(), g.size()));
        }
      }
    });
    stage_out(true, r.scale != 1.0 || gradient_scale != 1.0);
    ++updates_;
    return r;
  }

  /// The update of layer `layer` alone, on spans of its length (a weight version's copy, in the
  /// asynchronous executor; the elastic trainers' layers): the rule with that layer's state and
  /// count, no norm. Different layers may be updated at once from different threads.
  template <class T, class G>
  void operator()(std::size_t layer, std::span<T> w, std::span<G> g) {
    if (layer >= Model::size)
      throw std::invalid_argument("ctpipe::optimizer: no layer " + std::to_string(layer) + " in a model of " +
                                  std::to_string(Model::size));
    detail::with_model_layer<Model::size>(layer, [&]<std::size_t K>() {
      auto& st = std::get<K>(states_);
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
        using V = typename std::remove_cvref_t<decltype(st)>::value_type;
        if constexpr (std::is_same_v<std::remove_cv_t<T>, V> && std::is_same_v<std::remove_cv_t<G>, V>) {
          if (!st.held || w.size() != st.size || g.size() != st.size)
            throw std::invalid_argument(
                "ctpipe::optimizer: layer " + std::to_string(K) +
                (st.held ? " has " + std::to_string(st.size) + " parameters, not " + std::to_string(w.size())
                         : std::string(" is not held by this optimizer")));
          apply(K, st, std::span<V>(w.data(), w.size()), std::span<const V>(g.data(), g.size()));
        }
      }
    });
  }

  /// The global gradient norm of the held layers as step() computes it (collective where a place
  /// was given), without updating.
  double global_norm() {
    stage_in(false, true);
    return norm_of_staged();
  }

  /// The steps step() applied (skipped ones not counted).
  std::uint64_t updates() const noexcept { return updates_; }

  /// The updates layer `layer`'s tensors have had (the `step` the rule saw last).
  std::uint64_t layer_updates(std::size_t layer) const {
    std::uint64_t n = 0;
    detail::with_model_layer<Model::size>(layer, [&]<std::size_t K>() {
      const auto& st = std::get<K>(states_);
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) n = st.steps;
    });
    return n;
  }
  /// Layer K's whole state (state j of its values at j x its parameter count, tensor by tensor),
  /// and its update count: what moves with the layer when it changes process (the MPI elastic
  /// trainer). Empty where this optimizer does not hold layer K.
  template <std::size_t K>
  auto layer_state() {
    auto& st = std::get<K>(states_);
    if constexpr (std::remove_cvref_t<decltype(st)>::updates)
      return std::span<typename std::remove_cvref_t<decltype(st)>::value_type>(st.state);
    else
      return std::span<float>{};
  }
  void set_layer_updates(std::size_t layer, std::uint64_t n) {
    detail::with_model_layer<Model::size>(layer, [&]<std::size_t K>() {
      auto& st = std::get<K>(states_);
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) st.steps = n;
    });
  }
  /// Whether this optimizer holds (updates) layer `layer`.
  bool holds(std::size_t layer) const {
    bool h = false;
    detail::with_model_layer<Model::size>(layer, [&]<std::size_t K>() {
      const auto& st = std::get<K>(states_);
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) h = st.held;
    });
    return h;
  }
  /// Layer K's tensors, in order.
  template <std::size_t K>
  std::span<const tensor_slice> tensors() const {
    if constexpr (std::tuple_element_t<K, state_tuple>::updates)
      return std::get<K>(states_).tensors;
    else
      return {};
  }
  /// State `j` (Rule::state_names[j]) of layer K's tensor `t`: empty where this optimizer does
  /// not hold layer K.
  template <std::size_t K>
  auto state(std::size_t t, std::size_t j) {
    auto& st = std::get<K>(states_);
    if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
      using V = typename std::remove_cvref_t<decltype(st)>::value_type;
      if (!st.held || !detail::below(j, states)) return std::span<V>{};
      const tensor_slice& s = st.tensors.at(t);
      return std::span<V>(st.state).subspan(j * st.size + s.offset, s.size());
    } else {
      return std::span<float>{};
    }
  }

 private:
  template <class F>
  void each_layer(F&& f) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (f.template operator()<K>(model_.template layer<K>(), std::get<K>(states_)), ...);
    }
    (std::make_index_sequence<Model::size>{});
  }
  bool updates(std::size_t k) const { return place_ == nullptr || place_updates_(place_, k); }

  // A layer's values where the update reads and writes them: the layer's own (a host layer), or
  // the host copies (a device layer).
  template <class L, class St>
  static auto parameters_of(L& l, St& st) {
    if constexpr (device)
      return std::span<typename St::value_type>(st.host_w);
    else
      return l.parameters();
  }
  template <class L, class St>
  static auto gradients_of(L& l, St& st) {
    if constexpr (device)
      return std::span<typename St::value_type>(st.host_g);
    else
      return l.gradients();
  }
  // A device model: the held layers' parameters and/or gradients copied into the host copies
  // (stage_in) or back (stage_out), then waited for. Parameters going back (after an update, or a
  // checkpoint loaded) also rewrite the compute copies (model/compute_copy.hpp), a host model's too.
  void stage_in(bool parameters, bool gradients) { stage(parameters, gradients, true); }
  void stage_out(bool parameters, bool gradients) { stage(parameters, gradients, false); }
  void stage(bool parameters, bool gradients, bool to_host) {
    if constexpr (device) {
      if (!parameters && !gradients) return;
      each_layer([&]<std::size_t K>(auto& l, auto& st) {
        if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
          if (!st.held) return;
          const auto copy = [&](auto dev, auto& host) {
            if (to_host)
              place_copy_(place_, K, host.data(), dev.data(), dev.size_bytes(), true);
            else
              place_copy_(place_, K, dev.data(), host.data(), dev.size_bytes(), false);
          };
          if (parameters) copy(l.parameters(), st.host_w);
          if (gradients) copy(l.gradients(), st.host_g);
          if constexpr (has_compute_copy<std::remove_cvref_t<decltype(l)>>) {
            if (parameters && !to_host) {  // the compute copy, from the parameters as they go back
              using C = compute_element_t<std::remove_cvref_t<decltype(l)>>;
              for (std::size_t i = 0; i < st.size; ++i) st.host_c[i] = to_compute<C>(st.host_w[i]);
              copy(l.compute_parameters(), st.host_c);
            }
          }
        }
      });
      place_finish_(place_);
    } else {
      static_cast<void>(gradients);
      if (parameters && !to_host)  // (the parameters changed: an update, a checkpoint loaded)
        each_layer([&]<std::size_t K>(auto& l, auto& st) {
          if constexpr (has_compute_copy<std::remove_cvref_t<decltype(l)>>)
            if (st.held) write_compute_copy(l, K);
        });
    }
  }

  // The global norm of the gradients where the update reads them (collective where a place was
  // given).
  double norm_of_staged() {
    std::fill(terms_.begin(), terms_.end(), 0.0);
    each_layer([&]<std::size_t K>(auto& l, auto& st) {
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
        if (!st.held) return;
        const double t =
            square_sum(std::span<const typename std::remove_cvref_t<decltype(st)>::value_type>(gradients_of(l, st)),
                       st.skip_from, st.skip_to);
        if (counts(K))
          terms_[K] = t;
        else if (!std::isfinite(t))  // another process counts this layer: only say it is not finite here
          terms_[Model::size] += t;
      }
    });
    if (place_ != nullptr) place_sum_(place_, terms_);
    double total = 0.0;
    for (const double t : terms_) total += t;
    return std::sqrt(total);
  }
  bool counts(std::size_t k) const { return place_ == nullptr || place_counts_(place_, k); }

  // A gradient's sum of squares in double, in the one order every executor, the device and the
  // reference use (optim/detail/norm_order.hpp), [skip_from, skip_to) left out (a later member's
  // shared part).
  template <class T>
  double square_sum(std::span<T> g, std::size_t skip_from, std::size_t skip_to) {
    return detail::square_term(g.data(), detail::counted_range{g.size(), skip_from, skip_to}, scratch_.data());
  }

  void scale_gradients(double scale) {
    each_layer([&]<std::size_t K>(auto& l, auto& st) {
      if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
        if (!st.held) return;
        using V = typename std::remove_cvref_t<decltype(st)>::value_type;
        const V f = static_cast<V>(scale);
        for (V& x : gradients_of(l, st)) x *= f;
      }
    });
  }

  template <class St, class V>
  void apply(std::size_t k, St& st, std::span<V> w, std::span<const V> g) {
    const std::uint64_t step = ++st.steps;
    for (const tensor_slice& t : st.tensors) {
      const update_info u{k, t.tensor.name, step};
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        rule(u, w.subspan(t.offset, t.size()), g.subspan(t.offset, t.size()),
             std::span<V>(st.state).subspan(J * st.size + t.offset, t.size())...);
      }
      (std::make_index_sequence<states>{});
    }
  }

  Model& model_;
  state_tuple states_{};
  std::vector<double> terms_;
  std::vector<double> scratch_;  // the norm's block sums (optim/detail/norm_order.hpp), sized at construction
  std::uint64_t updates_ = 0;
  const void* place_ = nullptr;
  bool leads_ = true;
  bool (*place_updates_)(const void*, std::size_t) = nullptr;
  bool (*place_counts_)(const void*, std::size_t) = nullptr;
  void (*place_sum_)(const void*, std::span<double>) = nullptr;
  void (*place_copy_)(const void*, std::size_t, void*, const void*, std::size_t, bool) = nullptr;
  void (*place_finish_)(const void*) = nullptr;
};

template <model_type Model, class Rule>
optimizer(Model&, Rule, clipping = {}) -> optimizer<Model, Rule>;
template <model_type Model, class Place, class Rule>
optimizer(Model&, const Place&, Rule, clipping = {}) -> optimizer<Model, Rule>;

}  // namespace ctpipe
