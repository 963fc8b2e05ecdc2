// The reference every executor is measured against: one step on one thread, microbatch after
// microbatch, each a full forward, the loss and a full backward. Gradients accumulate in
// microbatch order, as in every ctpipe executor, so the two agree to the bit.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <ctpipe/model/context.hpp>
#include <ctpipe/model/detail/call.hpp>
#include <ctpipe/model/model.hpp>

namespace ctpipe {

/// Zeroes the gradients, then runs inputs.size() microbatches through `m` in order, writing each
/// microbatch's loss to losses[i]. Gradients end up summed over the microbatches. A layer that takes
/// a context gets microbatch origin.first_microbatch + i and step origin.step, as a pipelined step
/// with that origin gives it (ctpipe::context), so that their random streams agree.
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_step(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                     std::span<const typename Loss::target_type> targets, std::span<double> losses,
                     step_origin origin = {}) {
  if (targets.size() != inputs.size() || losses.size() != inputs.size())
    throw std::invalid_argument("ctpipe::sequential_step: inputs (" + std::to_string(inputs.size()) + "), targets (" +
                                std::to_string(targets.size()) + ") and losses (" + std::to_string(losses.size()) +
                                ") must have the same size");
  zero_gradients(m);
  activations_t<M> a{}, g{};
  saved_states_t<M, 0, M::size> s{};
  constexpr std::size_t L = M::size;
  for (std::size_t mb = 0; mb < inputs.size(); ++mb) {
    auto context_of = [&](std::size_t layer, op_kind op) {
      return [=] {
        return context{0, 0, static_cast<int>(layer), origin.first_microbatch + static_cast<int>(mb), op, origin.step};
      };
    };
    std::get<0>(a) = inputs[mb];
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (detail::call_forward(m.template layer<K>(), context_of(K, op_kind::forward), std::get<K>(a), std::get<K + 1>(a),
                            std::get<K>(s)),
       ...);
    }
    (std::make_index_sequence<L>{});
    losses[mb] = loss(std::get<L>(a), targets[mb], std::get<L>(g));
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (detail::call_backward<false>(m.template layer<L - 1 - K>(), context_of(L - 1 - K, op_kind::backward),
                                    std::get<L - 1 - K>(a), std::get<L - K>(a), std::get<L - 1 - K>(s),
                                    std::get<L - K>(g), std::get<L - 1 - K>(g)),
       ...);
    }
    (std::make_index_sequence<L>{});
  }
}

}  // namespace ctpipe
