// The sequential reference of elastic training (the threads' trainer and the MPI one): each
// replica's microbatches in order on a copy of the step's weights, the gradients summed in replica
// order, the optimizer on the layers not frozen (ctpipe::optimizer with SGD with momentum: each
// layer's state and update count its own, so a layer frozen later keeps the updates it had).
#pragma once
#include "mlp.hpp"

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace test {

// The update of the elastic tests, in the trainers and the reference alike.
inline constexpr ctpipe::sgd_momentum elastic_rule{.lr = 0.02, .momentum = 0.9};

// Steps are numbered from 0 for the layers' context (dropout): replica r's microbatches are the
// step's r x microbatches on.
template <class Model = mlp>
struct elastic_reference {
  Model model = make_mlp<Model>();
  std::uint64_t steps = 0;
  ctpipe::optimizer<Model, ctpipe::sgd_momentum> opt{model, elastic_rule};
  loss l;
  std::vector<double> step(const data_set& d, std::size_t at, const ctpipe::elastic_point& pt) {
    std::vector<Model> reps(static_cast<std::size_t>(pt.replicas), model);
    std::vector<double> losses(8);
    for (int r = 0; r < pt.replicas; ++r) {
      const auto first = at + static_cast<std::size_t>(r * pt.microbatches);
      ctpipe::sequential_step(reps[static_cast<std::size_t>(r)], l,
                              std::span<const input>(&d.inputs[first], static_cast<std::size_t>(pt.microbatches)),
                              std::span<const target>(&d.targets[first], static_cast<std::size_t>(pt.microbatches)),
                              std::span<double>(&losses[static_cast<std::size_t>(r * pt.microbatches)],
                                                static_cast<std::size_t>(pt.microbatches)),
                              {steps, r * pt.microbatches});
    }
    ++steps;
    [&]<std::size_t... K>(std::index_sequence<K...>) { (update<K>(reps, pt), ...); }
    (std::make_index_sequence<Model::size>{});
    return losses;
  }
  template <std::size_t K>
  void update(std::vector<Model>& reps, const ctpipe::elastic_point& pt) {
    if constexpr (ctpipe::has_parameters<typename Model::template layer_type<K>>) {
      if (static_cast<int>(K) < pt.frozen) return;
      auto g = reps[0].template layer<K>().gradients();
      for (std::size_t r = 1; r < reps.size(); ++r) {
        const auto h = reps[r].template layer<K>().gradients();
        for (std::size_t i = 0; i < g.size(); ++i) g[i] += h[i];
      }
      opt(K, model.template layer<K>().parameters(), std::span<const float>(g.data(), g.size()));
    }
  }
};

// Forward only, the trainers' and the reference's: `train` evaluates and predicts the first eight
// microbatches of `d`, and each must equal the sequential forward of the reference's model (at the
// steps it has run) to the bit.
template <class Trainer, class Model>
bool forward_matches(Trainer& train, elastic_reference<Model>& ref, const data_set& d) {
  const auto inputs = std::span<const input>(&d.inputs[0], 8);
  const auto targets = std::span<const target>(&d.targets[0], 8);
  std::vector<double> want(8);
  ctpipe::sequential_evaluate(ref.model, ref.l, inputs, targets, std::span<double>(want), {ref.steps, 0});
  const auto got = train.evaluate(inputs, targets);
  using output = typename Model::output_type;
  std::vector<output> want_out(8), got_out(8);
  ctpipe::sequential_predict(ref.model, inputs, std::span<output>(want_out), {ref.steps, 0});
  train.predict(inputs, got_out);
  return std::vector<double>(got.begin(), got.end()) == want && want_out == got_out;
}

}  // namespace test
