// Mixed precision: a layer that computes with a narrower copy of its parameters. Its parameters()
// and gradients() stay full precision (float): the master weights the optimizer updates, and the
// gradients every sum adds (across microbatches, shared groups, DualPipe's two copies, replicas)
// in float. compute_parameters() is a copy of parameters(), element for element, in the type the
// layer computes with (ctpipe::bf16: model/bf16.hpp); the layer reads it in its forward and
// backward (accumulating in float), and never writes it. The optimizers rewrite it from
// parameters() after every update they apply, each element rounded to the nearest (ctpipe::optimizer,
// ctpipe::cuda::device_optimizer); a layer writes it itself when it sets its parameters (init).
// A checkpoint holds the float parameters, and loads into a layer with a copy or without one.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE
#include <ctpipe/model/bf16.hpp>
#include <ctpipe/model/layer.hpp>

namespace ctpipe {

/// L has parameters and a compute copy of them (see the top of this file).
template <class L>
concept has_compute_copy = has_parameters<L> && requires(L& l) {
  typename decltype(l.compute_parameters())::element_type;
  requires std::is_constructible_v<std::remove_cv_t<typename decltype(l.compute_parameters())::element_type>,
                                   std::remove_cv_t<typename decltype(l.parameters())::element_type>>;
  { l.compute_parameters() } -> std::same_as<std::span<typename decltype(l.compute_parameters())::element_type>>;
};

template <has_compute_copy L>
using compute_element_t = std::remove_cv_t<typename decltype(std::declval<L&>().compute_parameters())::element_type>;

/// The one conversion from a master weight to its compute copy's element (rounded to the nearest),
/// on the host and in a kernel.
template <class C, class T>
CTPIPE_HOST_DEVICE inline C to_compute(T w) {
  return C(w);
}

/// A host layer's compute copy written from its parameters (the host optimizer after an update, a
/// layer's init), element by element rounded to the nearest. `layer` names the layer in the error
/// where the two lengths differ (std::invalid_argument).
template <has_compute_copy L>
void write_compute_copy(L& l, std::size_t layer = 0) {
  using C = compute_element_t<L>;
  const auto w = l.parameters();
  const auto c = l.compute_parameters();
  if (c.size() != w.size())
    throw std::invalid_argument("ctpipe: layer " + std::to_string(layer) + "'s compute_parameters() hold " +
                                std::to_string(c.size()) + " values, its parameters() " + std::to_string(w.size()));
  for (std::size_t i = 0; i < w.size(); ++i) c[i] = to_compute<C>(w[i]);
}

}  // namespace ctpipe
