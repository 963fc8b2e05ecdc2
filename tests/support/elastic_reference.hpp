// The sequential reference of elastic training (the threads' trainer and the MPI one): each
// replica's microbatches in order on a copy of the step's weights, the gradients summed in replica
// order, the optimizer on the layers not frozen.
#pragma once
#include "mlp.hpp"

#include <span>
#include <utility>
#include <vector>

namespace test {

struct elastic_reference {
  mlp model = make_mlp();
  ctpipe::sgd opt{0.02};
  loss l;
  std::vector<double> step(const data_set& d, std::size_t at, const ctpipe::elastic_point& pt) {
    std::vector<mlp> reps(static_cast<std::size_t>(pt.replicas), model);
    std::vector<double> losses(8);
    for (int r = 0; r < pt.replicas; ++r) {
      const auto first = at + static_cast<std::size_t>(r * pt.microbatches);
      ctpipe::sequential_step(reps[static_cast<std::size_t>(r)], l,
                              std::span<const input>(&d.inputs[first], static_cast<std::size_t>(pt.microbatches)),
                              std::span<const target>(&d.targets[first], static_cast<std::size_t>(pt.microbatches)),
                              std::span<double>(&losses[static_cast<std::size_t>(r * pt.microbatches)],
                                                static_cast<std::size_t>(pt.microbatches)));
    }
    [&]<std::size_t... K>(std::index_sequence<K...>) { (update<K>(reps, pt), ...); }
    (std::make_index_sequence<mlp::size>{});
    return losses;
  }
  template <std::size_t K>
  void update(std::vector<mlp>& reps, const ctpipe::elastic_point& pt) {
    if (static_cast<int>(K) < pt.frozen) return;
    auto g = reps[0].layer<K>().gradients();
    for (std::size_t r = 1; r < reps.size(); ++r) {
      const auto h = reps[r].layer<K>().gradients();
      for (std::size_t i = 0; i < g.size(); ++i) g[i] += h[i];
    }
    opt(K, model.layer<K>().parameters(), std::span<const float>(g.data(), g.size()));
  }
};

}  // namespace test
