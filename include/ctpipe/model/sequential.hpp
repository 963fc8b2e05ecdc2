// The reference every executor is measured against: one step on one thread, microbatch after
// microbatch, each a full forward, the loss and a full backward. Gradients accumulate in
// microbatch order, as in every ctpipe executor, so the two agree to the bit. And the forward
// pass alone (sequential_evaluate, sequential_predict), the reference for evaluate() and predict().
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <ctpipe/model/context.hpp>
#include <ctpipe/model/detail/call.hpp>
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe {

namespace detail {

// Every layer's input type, and every layer's output type, of model M as tuples.
template <class M, class Indices>
struct layer_tuples;
template <class M, std::size_t... K>
struct layer_tuples<M, std::index_sequence<K...>> {
  using inputs = std::tuple<typename M::template layer_type<K>::input_type...>;
  using outputs = std::tuple<typename M::template layer_type<K>::output_type...>;
};

// One microbatch of a model that is not a chain: every layer's output kept, each layer's input
// gathered from its sources, and in the backward each output's gradient the sum of its readers'
// contributions, added in the order the backward meets them (the last reader first; within a
// layer, its input parts in order), the first one copied.
template <class M>
struct graph_pass {
  template <std::size_t K>
  using layer_t = typename M::template layer_type<K>;
  // (A type, not a lambda in decltype: clang 14 crashes reading such an alias back from a
  // precompiled header.)
  using outputs = typename layer_tuples<M, std::make_index_sequence<M::size>>::outputs;

  // Where edge E (of M::edges) starts its output's gradient: no edge before it in the backward's
  // order reads the same output part.
  static constexpr bool first_contribution(std::size_t e) {
    const edge x = M::edges[e];
    for (const edge& y : M::edges)
      if (y.producer == x.producer && y.output == x.output &&
          (y.consumer > x.consumer || (y.consumer == x.consumer && y.input < x.input)))
        return false;
    return true;
  }
  // The index in M::edges of layer K's input part In.
  template <std::size_t K, std::size_t In>
  static constexpr std::size_t edge_of = [] {
    for (std::size_t e = 0; e < M::edges.size(); ++e)
      if (M::edges[e].consumer == static_cast<int>(K) && M::edges[e].input == static_cast<int>(In)) return e;
    return std::size_t{0};
  }();

  template <int P>
  static const auto& produced(const typename M::input_type& in, const outputs& y) {
    if constexpr (P < 0)
      return in;
    else
      return std::get<static_cast<std::size_t>(P)>(y);
  }
  // Layer K's input, gathered from its sources into x.
  template <std::size_t K>
  static void gather(const typename M::input_type& in, const outputs& y, typename layer_t<K>::input_type& x) {
    [&]<std::size_t... In>(std::index_sequence<In...>) {
      ((part<In>(x) = part<static_cast<std::size_t>(M::edges[edge_of<K, In>].output)>(
            produced<M::edges[edge_of<K, In>].producer>(in, y))),
       ...);
    }
    (std::make_index_sequence<parts_v<typename layer_t<K>::input_type>>{});
  }
  using inputs = typename layer_tuples<M, std::make_index_sequence<M::size>>::inputs;
  // One microbatch's tensors, on the heap (a model's tensors can be far larger than a thread's
  // stack): each layer's input x and output y, their gradients dx and g, and the saved states.
  // Reused from microbatch to microbatch: layers read only the rows of the microbatch's extent.
  struct workspace {
    inputs x{}, dx{};
    outputs y{}, g{};
    saved_states_t<M, 0, M::size> s{};
  };
  // Adds (or, for the first contribution, copies) layer K's input gradient dx into its sources'
  // output gradients g.
  template <std::size_t K>
  static void scatter(const typename layer_t<K>::input_type& dx, outputs& g) {
    [&]<std::size_t... In>(std::index_sequence<In...>) {
      (
          [&] {
            constexpr edge x = M::edges[edge_of<K, In>];
            if constexpr (x.producer >= 0) {
              auto& to = part<static_cast<std::size_t>(x.output)>(std::get<static_cast<std::size_t>(x.producer)>(g));
              if constexpr (first_contribution(edge_of<K, In>))
                to = part<In>(dx);
              else
                to += part<In>(dx);
            }
          }(),
          ...);
    }
    (std::make_index_sequence<parts_v<typename layer_t<K>::input_type>>{});
  }

  // The forward of one microbatch: every layer's input and output into w.x and w.y.
  template <class Ctx>
  static void forward(M& m, const typename M::input_type& in, workspace& w, const Ctx& context_of) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((gather<K>(in, w.y, std::get<K>(w.x)),
        detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(w.x), std::get<K>(w.y),
                             std::get<K>(w.s))),
       ...);
    }
    (std::make_index_sequence<M::size>{});
  }

  // Forward, loss and backward of one microbatch; returns its loss.
  template <class Loss, class Ctx>
  static double run(M& m, Loss& loss, const typename M::input_type& in, const typename Loss::target_type& t,
                    const Ctx& context_of, workspace& w) {
    constexpr std::size_t L = M::size;
    forward(m, in, w, context_of);
    const double l =
        detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L - 1>(w.y), t, std::get<L - 1>(w.g));
    [&]<std::size_t... R>(std::index_sequence<R...>) {
      (
          [&] {
            constexpr std::size_t K = L - 1 - R;
            detail::call_backward<false>(m.template layer<K>(), context_of(K, op_kind::backward), std::get<K>(w.x),
                                         std::get<K>(w.y), std::get<K>(w.s), std::get<K>(w.g), std::get<K>(w.dx));
            scatter<K>(std::get<K>(w.dx), w.g);
          }(),
          ...);
    }
    (std::make_index_sequence<L>{});
    return l;
  }
};

// One microbatch's tensors of a chain, on the heap (see graph_pass::workspace): every boundary's
// activation and gradient, and the saved states.
template <class M>
struct chain_workspace {
  activations_t<M> a{}, g{};
  saved_states_t<M, 0, M::size> s{};
};

// The references' spans: as many targets and losses as inputs.
inline void check_same_sizes(const char* who, std::size_t inputs, std::size_t targets, std::size_t losses) {
  if (targets != inputs || losses != inputs)
    throw std::invalid_argument(std::string(who) + ": inputs (" + std::to_string(inputs) + "), targets (" +
                                std::to_string(targets) + ") and losses (" + std::to_string(losses) +
                                ") must have the same size");
}

}  // namespace detail

/// Zeroes the gradients, then runs inputs.size() microbatches through `m` in order, writing each
/// microbatch's loss to losses[i]. Gradients end up summed over the microbatches. A layer that takes
/// a context gets microbatch origin.first_microbatch + i and step origin.step, as a pipelined step
/// with that origin gives it (ctpipe::context), so that their random streams agree, and microbatch
/// i's extent: extents[i] (ctpipe/model/extent.hpp; none given: the model's token capacity). A
/// model that is not a chain (nodes with sources) keeps every layer's output for its readers, and
/// gives an output read by several layers the sum of their gradients, the last reader's first. Where
/// layers share parameters (ctpipe::shared_with), each member's gradient ends up the members' sum,
/// in layer order (sum_shared_gradients); start their copies equal once, with tie_parameters.
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_step(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                     std::span<const typename Loss::target_type> targets, std::span<const int> extents,
                     std::span<double> losses, step_origin origin = {}) {
  detail::check_same_sizes("ctpipe::sequential_step", inputs.size(), targets.size(), losses.size());
  detail::check_extents("ctpipe::sequential_step", extents, inputs.size(), M::token_capacity);
  zero_gradients(m);
  const auto context_maker = [&](std::size_t mb) {
    const int extent =
        detail::extent_of(extents.empty() ? nullptr : extents.data(), static_cast<int>(mb), M::token_capacity);
    return [&, mb, extent](std::size_t layer, op_kind op) {
      return [=] {
        return context{0,           0,     static_cast<int>(layer), origin.first_microbatch + static_cast<int>(mb), op,
                       origin.step, extent};
      };
    };
  };
  if constexpr (!M::is_chain) {
    const auto w = std::make_unique<typename detail::graph_pass<M>::workspace>();
    for (std::size_t mb = 0; mb < inputs.size(); ++mb)
      losses[mb] = detail::graph_pass<M>::run(m, loss, inputs[mb], targets[mb], context_maker(mb), *w);
  } else {
    const auto w = std::make_unique<detail::chain_workspace<M>>();  // (on the heap: see graph_pass::workspace)
    auto& a = w->a;
    auto& g = w->g;
    auto& s = w->s;
    constexpr std::size_t L = M::size;
    for (std::size_t mb = 0; mb < inputs.size(); ++mb) {
      const auto context_of = context_maker(mb);
      std::get<0>(a) = inputs[mb];
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(a),
                              std::get<K + 1>(a), std::get<K>(s)),
         ...);
      }
      (std::make_index_sequence<L>{});
      losses[mb] =
          detail::call_loss(loss, context_of(L, op_kind::backward), std::get<L>(a), targets[mb], std::get<L>(g));
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (detail::call_backward<false>(m.template layer<L - 1 - K>(), context_of(L - 1 - K, op_kind::backward),
                                      std::get<L - 1 - K>(a), std::get<L - K>(a), std::get<L - 1 - K>(s),
                                      std::get<L - K>(g), std::get<L - 1 - K>(g)),
         ...);
      }
      (std::make_index_sequence<L>{});
    }
  }
  if constexpr (has_shared_parameters_v<M>) sum_shared_gradients(m);
}

namespace detail {
// The forward pass alone over inputs.size() microbatches in order, the layers told it is no
// training step (context::training false): for microbatch i, each_output(i, its output). Leaves
// the gradients as they are.
template <model_type M, class Each>
void sequential_forward(M& m, std::span<const typename M::input_type> inputs, std::span<const int> extents,
                        step_origin origin, Each&& each_output) {
  constexpr std::size_t L = M::size;
  const auto w = [] {
    if constexpr (M::is_chain)
      return std::make_unique<chain_workspace<M>>();
    else
      return std::make_unique<typename graph_pass<M>::workspace>();
  }();
  for (std::size_t mb = 0; mb < inputs.size(); ++mb) {
    const int extent =
        detail::extent_of(extents.empty() ? nullptr : extents.data(), static_cast<int>(mb), M::token_capacity);
    const auto context_of = [&](std::size_t layer, op_kind op) {
      return [=] {
        return context{
            0,      0,    static_cast<int>(layer), origin.first_microbatch + static_cast<int>(mb), op, origin.step,
            extent, false};
      };
    };
    if constexpr (!M::is_chain) {
      graph_pass<M>::forward(m, inputs[mb], *w, context_of);
      each_output(mb, std::get<L - 1>(w->y), context_of(L, op_kind::forward));
    } else {
      auto& a = w->a;
      auto& s = w->s;
      std::get<0>(a) = inputs[mb];
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(a),
                              std::get<K + 1>(a), std::get<K>(s)),
         ...);
      }
      (std::make_index_sequence<L>{});
      each_output(mb, std::get<L>(a), context_of(L, op_kind::forward));
    }
  }
}
}  // namespace detail

/// The reference for an executor's evaluate(): the forward pass alone over inputs.size()
/// microbatches in order, with the layers' context saying it is no training step
/// (context::training false: dropout passes its input through), and each microbatch's loss into
/// losses[i]. No gradient is zeroed or computed (the loss's gradient goes to a scratch).
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_evaluate(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                         std::span<const typename Loss::target_type> targets, std::span<const int> extents,
                         std::span<double> losses, step_origin origin = {}) {
  detail::check_same_sizes("ctpipe::sequential_evaluate", inputs.size(), targets.size(), losses.size());
  detail::check_extents("ctpipe::sequential_evaluate", extents, inputs.size(), M::token_capacity);
  typename M::output_type dy{};
  detail::sequential_forward(m, inputs, extents, origin, [&](std::size_t mb, const auto& y, const auto& ctx) {
    losses[mb] = detail::call_loss(loss, ctx, y, targets[mb], dy);
  });
}
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_evaluate(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                         std::span<const typename Loss::target_type> targets, std::span<double> losses,
                         step_origin origin = {}) {
  sequential_evaluate(m, loss, inputs, targets, std::span<const int>{}, losses, origin);
}

/// The reference for an executor's predict(): the forward pass alone, as sequential_evaluate, each
/// microbatch's output into outputs[i] (with extents, its used tokens, and zeros past them).
template <model_type M>
void sequential_predict(M& m, std::span<const typename M::input_type> inputs, std::span<const int> extents,
                        std::span<typename M::output_type> outputs, step_origin origin = {}) {
  if (outputs.size() != inputs.size())
    throw std::invalid_argument("ctpipe::sequential_predict: inputs (" + std::to_string(inputs.size()) +
                                ") and outputs (" + std::to_string(outputs.size()) + ") must have the same size");
  detail::check_extents("ctpipe::sequential_predict", extents, inputs.size(), M::token_capacity);
  for (auto& y : outputs) y = typename M::output_type{};
  detail::sequential_forward(m, inputs, extents, origin, [&](std::size_t mb, const auto& y, const auto&) {
    const int e =
        detail::extent_of(extents.empty() ? nullptr : extents.data(), static_cast<int>(mb), M::token_capacity);
    using O = typename M::output_type;
    if constexpr (token_major<O>)
      std::memcpy(static_cast<void*>(&outputs[mb]), static_cast<const void*>(&y), used_bytes<O>(e));
    else
      outputs[mb] = y;
  });
}
template <model_type M>
void sequential_predict(M& m, std::span<const typename M::input_type> inputs,
                        std::span<typename M::output_type> outputs, step_origin origin = {}) {
  sequential_predict(m, inputs, std::span<const int>{}, outputs, origin);
}

/// The same, every microbatch using all its tensors' tokens (a model of fixed shapes).
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_step(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                     std::span<const typename Loss::target_type> targets, std::span<double> losses,
                     step_origin origin = {}) {
  sequential_step(m, loss, inputs, targets, std::span<const int>{}, losses, origin);
}

}  // namespace ctpipe
