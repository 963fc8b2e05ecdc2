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

#include <ctpipe/model/model.hpp>

namespace ctpipe {

/// Zeroes the gradients, then runs inputs.size() microbatches through `m` in order, writing each
/// microbatch's loss to losses[i]. Gradients end up summed over the microbatches.
template <model_type M, class Loss>
requires loss_function<Loss, typename M::output_type>
void sequential_step(M& m, Loss& loss, std::span<const typename M::input_type> inputs,
                     std::span<const typename Loss::target_type> targets, std::span<double> losses) {
  if (targets.size() != inputs.size() || losses.size() != inputs.size())
    throw std::invalid_argument("ctpipe::sequential_step: inputs (" + std::to_string(inputs.size()) + "), targets (" +
                                std::to_string(targets.size()) + ") and losses (" + std::to_string(losses.size()) +
                                ") must have the same size");
  zero_gradients(m);
  activations_t<M> a{}, g{};
  for (std::size_t mb = 0; mb < inputs.size(); ++mb) {
    std::get<0>(a) = inputs[mb];
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (m.template layer<K>().forward(std::get<K>(a), std::get<K + 1>(a)), ...);
    }
    (std::make_index_sequence<M::size>{});
    losses[mb] = loss(std::get<M::size>(a), targets[mb], std::get<M::size>(g));
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      constexpr std::size_t L = M::size;
      (m.template layer<L - 1 - K>().backward(std::get<L - 1 - K>(a), std::get<L - K>(a), std::get<L - K>(g),
                                              std::get<L - 1 - K>(g)),
       ...);
    }
    (std::make_index_sequence<M::size>{});
  }
}

}  // namespace ctpipe
