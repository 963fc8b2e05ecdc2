// Each layer of a model measured on this machine: the time of one call of its forward and of its
// backward's two halves, and its sizes. What the planner's model file says of a model, taken from
// the model itself (examples/gpt writes one: docs/planner.md).
//
//   auto layers = ctpipe::measure_layers(model, loss, input, target);   // one microbatch, full extent
//   layers[3].forward                                                    // seconds per call
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include <ctpipe/model/context.hpp>
#include <ctpipe/model/detail/call.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/sequential.hpp>
#include <ctpipe/model/shared.hpp>

namespace ctpipe {

/// One layer, measured on one microbatch. Times are seconds per call: its forward, its
/// input-gradient half (I) and its weight-gradient half (W); a layer that does not split its
/// backward has it whole as I, and 0 as W (as the executors run it). The loss's time is counted in
/// the last layer's I (the executors run the loss just before that layer's backward, on its rank). Sizes are bytes at
/// the microbatch's full capacity: its output, its saved state, its parameters (where it shares an earlier layer's, the
/// shared part: shares_with names that layer, -1 none), and how far back its farthest source is beyond the layer just
/// before it (skip: 0 for none; the model's input counts as layer -1).
struct layer_measure {
  double forward = 0.0;
  double backward_input = 0.0;
  double backward_weight = 0.0;
  std::size_t output_bytes = 0;
  std::size_t saved_bytes = 0;
  std::size_t parameter_bytes = 0;
  int shares_with = -1;
  int skip = 0;
};

namespace detail {

// The median of v (v is reordered).
inline double median_of(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Layer K's sizes and its sources (M::edges, M::shares).
template <model_type M, std::size_t K>
layer_measure sizes_of(M& m) {
  using L = typename M::template layer_type<K>;
  layer_measure out{};
  out.output_bytes = sizeof(typename L::output_type);
  if constexpr (has_saved_state<L>) out.saved_bytes = sizeof(saved_t<L>);
  out.shares_with = M::shares[K];
  auto& l = m.template layer<K>();
  if constexpr (shareable_layer<L>) {
    if (out.shares_with >= 0) out.parameter_bytes = shared_parameters_of(l).size_bytes();
  }
  if constexpr (has_parameters<L>) {
    if (out.shares_with < 0) out.parameter_bytes = l.parameters().size_bytes();
  }
  if constexpr (!M::is_chain)
    for (const edge& e : M::edges)
      if (e.consumer == static_cast<int>(K) && e.producer != static_cast<int>(K) - 1)
        out.skip = std::max(out.skip, static_cast<int>(K) - e.producer);
  return out;
}

}  // namespace detail

/// Measures every layer of `m` on one microbatch (`input`, `target`, its extent: the model's token
/// capacity when not given): `rounds` passes of forward, loss and backward (each layer's I, then
/// its W), one after the other as a step runs them, each call timed where it runs (the caches as a
/// step leaves them, not as a call repeated on its own tensors would); each figure is the median
/// of the passes, after one pass to warm up. The gradients are zeroed after.
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type> std::vector<layer_measure> measure_layers(
    M& m, Loss& loss, const typename M::input_type& input, const typename Loss::target_type& target,
    int extent = M::token_capacity, int rounds = 9) {
  constexpr std::size_t L = M::size;
  using clock = std::chrono::steady_clock;
  const auto context_of = [&](std::size_t layer, op_kind op) {
    return [=] { return context{0, 0, static_cast<int>(layer), 0, op, 0, extent}; };
  };
  const int passes = rounds < 1 ? 1 : rounds;
  // Each op's time in each pass: [layer][0 F, 1 I, 2 W][pass]; the loss's.
  std::vector<std::array<std::vector<double>, 3>> t(L);
  std::vector<double> loss_times;
  const auto timed = [](auto&& f) {
    const auto a = clock::now();
    f();
    return std::chrono::duration<double>(clock::now() - a).count();
  };
  const auto keep = [&](bool warm, std::size_t k, int op, double s) {
    if (!warm) t[k][static_cast<std::size_t>(op)].push_back(s);
  };
  // Layer K's I then W (a layer that does not split: its whole backward as I).
  const auto backward = [&]<std::size_t K>(std::integral_constant<std::size_t, K>, bool warm, const auto& x,
                                           const auto& y, auto& s, const auto& dy, auto& dx) {
    using Layer = typename M::template layer_type<K>;
    auto& l = m.template layer<K>();
    if constexpr (splittable_layer<Layer>) {
      keep(warm, K, 1,
           timed([&] { detail::call_backward<true>(l, context_of(K, op_kind::backward_input), x, y, s, dy, dx); }));
      keep(warm, K, 2,
           timed([&] { detail::call_backward_weight(l, context_of(K, op_kind::backward_weight), x, y, s, dy); }));
    } else {
      keep(warm, K, 1,
           timed([&] { detail::call_backward<false>(l, context_of(K, op_kind::backward), x, y, s, dy, dx); }));
      keep(warm, K, 2, 0.0);
    }
  };
  zero_gradients(m);
  if constexpr (!M::is_chain) {
    using pass = detail::graph_pass<M>;
    const auto w = std::make_unique<typename pass::workspace>();
    for (int round = 0; round <= passes; ++round) {
      const bool warm = round == 0;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        ((pass::template gather<K>(input, w->y, std::get<K>(w->x)),
          keep(warm, K, 0, timed([&] {
                 detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(w->x),
                                      std::get<K>(w->y), std::get<K>(w->s));
               }))),
         ...);
        const double lt = timed([&] {
          detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L - 1>(w->y), target,
                            std::get<L - 1>(w->g));
        });
        if (!warm) loss_times.push_back(lt);
        ((backward(std::integral_constant<std::size_t, L - 1 - K>{}, warm, std::get<L - 1 - K>(w->x),
                   std::get<L - 1 - K>(w->y), std::get<L - 1 - K>(w->s), std::get<L - 1 - K>(w->g),
                   std::get<L - 1 - K>(w->dx)),
          pass::template scatter<L - 1 - K>(std::get<L - 1 - K>(w->dx), w->g)),
         ...);
      }
      (std::make_index_sequence<L>{});
    }
  } else {
    const auto w = std::make_unique<detail::chain_workspace<M>>();
    std::get<0>(w->a) = input;
    for (int round = 0; round <= passes; ++round) {
      const bool warm = round == 0;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (keep(warm, K, 0, timed([&] {
                detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(w->a),
                                     std::get<K + 1>(w->a), std::get<K>(w->s));
              })),
         ...);
        const double lt = timed([&] {
          detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L>(w->a), target, std::get<L>(w->g));
        });
        if (!warm) loss_times.push_back(lt);
        (backward(std::integral_constant<std::size_t, L - 1 - K>{}, warm, std::get<L - 1 - K>(w->a),
                  std::get<L - K>(w->a), std::get<L - 1 - K>(w->s), std::get<L - K>(w->g), std::get<L - 1 - K>(w->g)),
         ...);
      }
      (std::make_index_sequence<L>{});
    }
  }
  zero_gradients(m);
  std::vector<layer_measure> out(L);
  [&]<std::size_t... K>(std::index_sequence<K...>) { ((out[K] = detail::sizes_of<M, K>(m)), ...); }
  (std::make_index_sequence<L>{});
  for (std::size_t k = 0; k < L; ++k) {
    out[k].forward = detail::median_of(t[k][0]);
    out[k].backward_input = detail::median_of(t[k][1]);
    out[k].backward_weight = detail::median_of(t[k][2]);
  }
  out.back().backward_input += detail::median_of(loss_times);
  return out;
}

}  // namespace ctpipe
