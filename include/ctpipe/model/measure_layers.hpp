// Each layer of a model measured on this machine: the time of one call of its forward and of its
// backward's two halves, and its sizes. What the planner's model file says of a model, taken from
// the model itself (examples/gpt writes one: docs/planner.md).
//
//   auto layers = ctpipe::measure_layers(model, loss, input, target);   // one microbatch, full extent
//   layers[3].forward                                                    // seconds per call
#pragma once

#include <algorithm>
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

// Seconds per call of f: the best of `rounds` rounds, each of as many calls as take about a
// millisecond (at least one).
template <class F>
double seconds_per_call(F&& f, int rounds) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  f();
  const double once = std::chrono::duration<double>(clock::now() - t0).count();
  const int calls = once >= 1e-3 ? 1 : static_cast<int>(std::min(1000.0, 1e-3 / std::max(once, 1e-9)));
  double best = once;
  for (int r = 0; r < rounds; ++r) {
    const auto a = clock::now();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, std::chrono::duration<double>(clock::now() - a).count() / calls);
  }
  return best;
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
/// capacity when not given): one forward, loss and backward first, then each layer's calls timed
/// alone on that microbatch's tensors, each the best of `rounds` rounds. The gradients are zeroed
/// after (the timed calls add to them).
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type> std::vector<layer_measure> measure_layers(
    M& m, Loss& loss, const typename M::input_type& input, const typename Loss::target_type& target,
    int extent = M::token_capacity, int rounds = 5) {
  std::vector<layer_measure> out(M::size);
  const auto context_of = [&](std::size_t layer, op_kind op) {
    return [=] { return context{0, 0, static_cast<int>(layer), 0, op, 0, extent}; };
  };
  zero_gradients(m);
  // The microbatch's tensors: each layer's input, output, saved state and output gradient.
  const auto time = [&]<std::size_t K>(std::integral_constant<std::size_t, K>, auto& x, auto& y, auto& s,
                                       const auto& dy, auto& dx) {
    using L = typename M::template layer_type<K>;
    auto& l = m.template layer<K>();
    layer_measure& r = out[K];
    r = detail::sizes_of<M, K>(m);
    r.forward =
        detail::seconds_per_call([&] { detail::call_forward(l, context_of(K, op_kind::forward), x, y, s); }, rounds);
    if constexpr (splittable_layer<L>) {
      r.backward_input = detail::seconds_per_call(
          [&] { detail::call_backward<true>(l, context_of(K, op_kind::backward_input), x, y, s, dy, dx); }, rounds);
      r.backward_weight = detail::seconds_per_call(
          [&] { detail::call_backward_weight(l, context_of(K, op_kind::backward_weight), x, y, s, dy); }, rounds);
    } else {
      r.backward_input = detail::seconds_per_call(
          [&] { detail::call_backward<false>(l, context_of(K, op_kind::backward), x, y, s, dy, dx); }, rounds);
    }
  };
  double loss_time = 0.0;
  if constexpr (!M::is_chain) {
    using pass = detail::graph_pass<M>;
    const auto w = std::make_unique<typename pass::workspace>();
    pass::run(m, loss, input, target, context_of, *w);
    constexpr std::size_t L = M::size;
    const auto dy = std::make_unique<typename M::output_type>();
    loss_time = detail::seconds_per_call(
        [&] { detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L - 1>(w->y), target, *dy); }, rounds);
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (time(std::integral_constant<std::size_t, K>{}, std::get<K>(w->x), std::get<K>(w->y), std::get<K>(w->s),
            std::get<K>(w->g), std::get<K>(w->dx)),
       ...);
    }
    (std::make_index_sequence<M::size>{});
  } else {
    constexpr std::size_t L = M::size;
    const auto w = std::make_unique<detail::chain_workspace<M>>();
    std::get<0>(w->a) = input;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(w->a),
                            std::get<K + 1>(w->a), std::get<K>(w->s)),
       ...);
      detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L>(w->a), target, std::get<L>(w->g));
      const auto dy = std::make_unique<typename M::output_type>();
      loss_time = detail::seconds_per_call(
          [&] { detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L>(w->a), target, *dy); }, rounds);
      (detail::call_backward<false>(m.template layer<L - 1 - K>(), context_of(L - 1 - K, op_kind::backward),
                                    std::get<L - 1 - K>(w->a), std::get<L - K>(w->a), std::get<L - 1 - K>(w->s),
                                    std::get<L - K>(w->g), std::get<L - 1 - K>(w->g)),
       ...);
      // Each layer's input gradient into a scratch copy: the timed calls leave g as it is.
      const auto dx = std::make_unique<activations_t<M>>();
      (time(std::integral_constant<std::size_t, K>{}, std::get<K>(w->a), std::get<K + 1>(w->a), std::get<K>(w->s),
            std::get<K + 1>(w->g), std::get<K>(*dx)),
       ...);
    }
    (std::make_index_sequence<L>{});
  }
  out.back().backward_input += loss_time;
  zero_gradients(m);
  return out;
}

}  // namespace ctpipe
