// The weight versions of an asynchronous pipeline (schedule/async.hpp): per stage, a fixed number
// of copies of that stage's layers, allocated once with the executor. A task reads the copy its
// version lives in; an update writes the next version into the slot of the version just retired.
// Each stage's copies are touched by its rank's thread alone.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/detail/index.hpp>              // ix
#include <ctpipe/exec/detail/host_compute.hpp>  // cache_line
#include <ctpipe/model/model.hpp>

namespace ctpipe::detail {

/// One copy of the layers of stage S of Model split by Stages; layer<K>() takes the model's index K
/// (as Model::layer<K> does), so that the same task code runs on the model or on a copy.
template <class Model, auto Stages, int S>
struct stage_copy {
  static constexpr std::size_t first = detail::ix(Stages.first[detail::ix(S)]);
  static constexpr std::size_t count = detail::ix(Stages.first[detail::ix(S) + 1]) - first;
  template <std::size_t... K>
  static auto tuple_of(std::index_sequence<K...>) -> std::tuple<typename Model::template layer_type<first + K>...>;
  decltype(tuple_of(std::make_index_sequence<count>{})) layers{};

  template <std::size_t K>
  auto& layer() {
    return std::get<K - first>(layers);
  }
  // f(index in the model, layer) for each layer of the stage.
  template <class F>
  void each(F&& f) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (f(std::integral_constant<std::size_t, first + K>{}, std::get<K>(layers)), ...);
    }
    (std::make_index_sequence<count>{});
  }
};

/// An optimizer an asynchronous executor can call: opt(layer, parameters, gradients) updates the
/// parameters of the model's layer `layer` in place from its gradients. Called from the thread of
/// the rank that holds the layer: different layers concurrently, one layer's updates in order.
template <class O, class T>
concept layer_optimizer = requires(O& o, std::size_t layer, std::span<T> w, std::span<const T> g) {
  o(layer, w, g);
};

// Whether Opt can update layer L's parameters (a layer without any: trivially).
template <class Opt, class L>
constexpr bool optimizes_layer() {
  if constexpr (has_parameters<L>)
    return layer_optimizer<Opt, typename decltype(std::declval<L&>().parameters())::element_type>;
  else
    return true;
}

/// The optimizer's rule, with one wording for every trainer that updates the layers itself (the
/// asynchronous executor, the elastic trainers: each names itself in the "required from" lines).
template <class Model, class Optimizer>
struct optimizer_requirements {
  static_assert(
      []<std::size_t... K>(std::index_sequence<K...>) {
        return (optimizes_layer<Optimizer, typename Model::template layer_type<K>>() && ...);
      }(std::make_index_sequence<Model::size>{}),
      "ctpipe: Optimizer must be callable as opt(std::size_t layer, std::span<T> parameters, std::span<const T> "
      "gradients) for the parameter type T of every layer with parameters");
  static constexpr bool value = true;
};

/// Slots[S] copies of each stage S's layers.
template <class Model, auto Stages, auto Slots>
class version_store {
  static constexpr std::size_t stage_count = Slots.size();
  template <std::size_t S>
  struct alignas(cache_line) stage_versions {
    std::array<stage_copy<Model, Stages, static_cast<int>(S)>, detail::ix(Slots[S])> slot{};
  };
  template <class Seq>
  struct tuple_for;
  template <std::size_t... S>
  struct tuple_for<std::index_sequence<S...>> {
    using type = std::tuple<stage_versions<S>...>;
  };
  typename tuple_for<std::make_index_sequence<stage_count>>::type v_{};

  template <class L>
  static void zero(L& l) {
    zero_layer_gradients(l);
  }

 public:
  template <int S>
  stage_copy<Model, Stages, S>& at(int slot) {
    return std::get<detail::ix(S)>(v_).slot[detail::ix(slot)];
  }

  /// Every slot of every stage becomes a copy of the model's layers (version 0), gradients zeroed.
  void load(Model& m) {
    [&]<std::size_t... S>(std::index_sequence<S...>) { (load_stage<S>(m), ...); }
    (std::make_index_sequence<stage_count>{});
  }
  /// The parameters of the slot `slot(S)` of every stage S go into the model's layers.
  template <class SlotOf>
  void store(Model& m, SlotOf slot) {
    [&]<std::size_t... S>(std::index_sequence<S...>) {
      (at<static_cast<int>(S)>(slot(static_cast<int>(S))).each([&](auto k, auto& l) {
        if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>) {
          const auto from = l.parameters();
          std::copy(from.begin(), from.end(), m.template layer<decltype(k)::value>().parameters().begin());
        }
      }),
       ...);
    }
    (std::make_index_sequence<stage_count>{});
  }

  /// The update of stage S: slot `target` (which holds the version its backwards used and their
  /// summed gradients) takes the parameters of slot `source` (the newest version), then
  /// opt(layer, parameters, gradients) makes the next version there; its gradients are zeroed.
  template <int S, class Opt>
  void update(int target, int source, Opt& opt) {
    auto& from = at<S>(source);
    at<S>(target).each([&](auto k, auto& l) {
      if constexpr (has_parameters<std::remove_cvref_t<decltype(l)>>) {
        const auto w = l.parameters();
        if (target != source) {
          const auto src = from.template layer<decltype(k)::value>().parameters();
          std::copy(src.begin(), src.end(), w.begin());
        }
        const auto g = l.gradients();
        using T = typename decltype(w)::element_type;
        opt(decltype(k)::value, w, std::span<const T>(g.data(), g.size()));
        zero(l);
      }
    });
  }

 private:
  template <std::size_t S>
  void load_stage(Model& m) {
    for (auto& c : std::get<S>(v_).slot)
      c.each([&](auto k, auto& l) {
        l = m.template layer<decltype(k)::value>();
        zero(l);
      });
  }
};

}  // namespace ctpipe::detail
