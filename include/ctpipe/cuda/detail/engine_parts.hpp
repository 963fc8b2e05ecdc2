// The CUDA engine's stage tasks, in two parts: a chain's (cuda/detail/engine_chain.hpp) and a graph
// model's (cuda/detail/engine_graph.hpp). Each is a class of static functions that take the engine
// (E, which befriends them) and reach its buffers, streams, layers and transport through it; this
// header gives both the engine's facts they read, by their engine names, so that their code reads
// as the engine's own. The engine instantiates the part its model takes, and never the other.
#pragma once

#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/model/model.hpp>   // model_type

namespace ctpipe::cuda::detail {

template <class E, model_type Model, auto Stages, class Backend>
struct stage_parts {
  using stream_type = typename E::stream_type;
  static constexpr auto& layout_ = E::layout_;
  static constexpr auto& mem = E::mem;
  static constexpr auto& chains_ = E::chains_;
  static constexpr int stage_count = E::stage_count, only = E::only, microbatches = E::microbatches;
  static constexpr bool forward_only = E::forward_only;
  template <int S>
  static constexpr int first_layer = E::template first_layer<S>;
  template <int S>
  static constexpr int layer_count = E::template layer_count<S>;
  template <int S, int K>
  using element_t = typename E::template element_t<S, K>;
  template <int B>
  using boundary_tensor = typename E::template boundary_tensor<B>;
  template <int B>
  static constexpr int capacity = E::template capacity<B>;
  template <int B>
  static constexpr int reused = E::template reused<B>;
  template <int S>
  static constexpr int device_of = E::template device_of<S>;

  class chain;  // a chain's stages (cuda/detail/engine_chain.hpp)
  class graph;  // a graph model's stages (cuda/detail/engine_graph.hpp)
};

}  // namespace ctpipe::cuda::detail
