// A layer without parameters: the rectifier y = max(x, 0) over a Rows x Cols matrix. It has no
// parameters() and no gradients(), so executors store, update and sum nothing for it; it exists so
// that models may hold activations, reshapes and the like as layers of their own (and so that the
// tests train such a model on every executor).
#pragma once

#include <ctpipe/layers/dense.hpp>  // matrix

#include <cstddef>

namespace ctpipe::layers {

/// y = max(x, 0), elementwise (with rows::tokens, over the microbatch's extent). Its backward
/// passes dy where y > 0; the same arithmetic as dense<..., activation::relu>, so dense<...,
/// activation::none> followed by relu gives the bits of the fused layer.
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct relu {
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = static_cast<double>(Rows * Cols);

  void forward(const input_type& x, output_type& y) const requires(R == rows::fixed) { rectify(Rows, x, y); }
  void backward(const input_type&, const output_type& y, const output_type& dy, input_type& dx) const
      requires(R == rows::fixed) {
    pass(Rows, y, dy, dx);
  }
  void forward(const context& c, const input_type& x, output_type& y) const requires(R == rows::tokens) {
    rectify(used_rows<R, Rows>(c), x, y);
  }
  void backward(const context& c, const input_type&, const output_type& y, const output_type& dy, input_type& dx) const
      requires(R == rows::tokens) {
    pass(used_rows<R, Rows>(c), y, dy, dx);
  }

 private:
  static void rectify(std::size_t n, const input_type& x, output_type& y) {
    for (std::size_t i = 0; i < n * Cols; ++i) y.v[i] = x.v[i] < 0.0f ? 0.0f : x.v[i];
  }
  static void pass(std::size_t n, const output_type& y, const output_type& dy, input_type& dx) {
    for (std::size_t i = 0; i < n * Cols; ++i) dx.v[i] = y.v[i] <= 0.0f ? 0.0f : dy.v[i];
  }
};

}  // namespace ctpipe::layers
