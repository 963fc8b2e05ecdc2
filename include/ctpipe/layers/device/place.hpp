// Where a device layer's memory goes: on the device of the rank that runs it. A device layer
// allocates on the current device when it is made; place<Executor>(model) moves each layer that
// can move (a member place(int device)) to the device Executor runs it on. Call it before making
// the executor, which reads the layers' memory where it finds it.
#pragma once

#include <cstddef>
#include <utility>

#include <ctpipe/model/model.hpp>

namespace ctpipe::layers::device {

/// The device Executor (a CUDA executor type) runs model layer k on: its stage's rank's.
template <class Executor>
constexpr int device_of_layer(std::size_t k) {
  int s = 0;
  while (s + 1 < Executor::stages.stages() && static_cast<std::size_t>(Executor::stages.begin(s + 1)) <= k) ++s;
  return Executor::devices[static_cast<std::size_t>(Executor::plan.table.rank_of(s))];
}

/// Moves every layer of `model` that has a place(int) member to the device Executor runs it on (and
/// `loss`, where given and it has one, to the last stage's).
template <class Executor, class Model, class... Loss>
void place(Model& model, Loss&... loss) {
  static_assert(sizeof...(Loss) <= 1, "ctpipe::layers::device::place: a model, and at most its loss");
  static_assert(!Executor::mirrored,
                "ctpipe::layers::device::place: a bidirectional table (dualpipe) runs each stage on two ranks: "
                "place the model's and the mirror's layers by hand (each layer's place(device))");
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          auto& l = model.template layer<K>();
          if constexpr (requires { l.place(0); }) l.place(device_of_layer<Executor>(K));
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
  (
      [&] {
        if constexpr (requires { loss.place(0); }) loss.place(device_of_layer<Executor>(Model::size - 1));
      }(),
      ...);
}

}  // namespace ctpipe::layers::device
