// A reference layer norm for the CPU that keeps its statistics for the backward (a saved_type):
// its backward reads each row's mean and inverse deviation instead of computing them again, and its
// split backward (I: dx, W: the scale and shift gradients) reads them too. Plain loops in a fixed
// order, so every run gives the same bits.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include <ctpipe/layers/dense.hpp>            // matrix
#include <ctpipe/layers/detail/row_math.hpp>  // layer_norm_row, layer_norm_input_row, layer_norm_weight_column

namespace ctpipe::layers {

/// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row of a Rows x Cols matrix (with
/// rows::tokens, per row of the microbatch's extent). Parameters: gamma (Cols, initially 1), then
/// beta (Cols, initially 0).
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct layer_norm {
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  /// What the forward keeps for the backward: each row's mean and 1 / sqrt(var + eps).
  struct saved_type {
    std::array<float, Rows> mean{}, inv_std{};
    constexpr bool operator==(const saved_type&) const = default;
  };
  static constexpr double cost = 8.0 * static_cast<double>(Rows * Cols);
  static constexpr float eps = detail::layer_norm_eps;

  std::array<float, 2 * Cols> params = [] {
    std::array<float, 2 * Cols> p{};
    for (std::size_t c = 0; c < Cols; ++c) p[c] = 1.0f;
    return p;
  }();
  std::array<float, 2 * Cols> grads{};
  /// The tensors of params (and grads), in order: gamma ("weight"), then beta ("bias").
  static constexpr std::array parameter_tensors{parameter_tensor{"weight", {Cols}}, parameter_tensor{"bias", {Cols}}};

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }

  void forward(const input_type& x, output_type& y, saved_type& s) const requires(R == rows::fixed) {
    forward_rows(Rows, x, y, s);
  }
  void backward(const input_type& x, const output_type&, const saved_type& s, const output_type& dy,
                input_type& dx) requires(R == rows::fixed) {
    weight_gradients(Rows, x, s, dy);
    input_gradient(Rows, x, s, dy, dx);
  }
  /// Split backward, I: dx only (the same arithmetic as backward).
  void backward_input(const input_type& x, const output_type&, saved_type& s, const output_type& dy,
                      input_type& dx) const requires(R == rows::fixed) {
    input_gradient(Rows, x, s, dy, dx);
  }
  /// Split backward, W: d gamma += sum over rows of dy * xhat, d beta += sum of dy.
  void backward_weight(const input_type& x, const output_type&, const saved_type& s,
                       const output_type& dy) requires(R == rows::fixed) {
    weight_gradients(Rows, x, s, dy);
  }

  /// The same four calls over the microbatch's extent (rows::tokens).
  void forward(const context& c, const input_type& x, output_type& y, saved_type& s) const requires(R == rows::tokens) {
    forward_rows(used_rows<R, Rows>(c), x, y, s);
  }
  void backward(const context& c, const input_type& x, const output_type&, const saved_type& s, const output_type& dy,
                input_type& dx) requires(R == rows::tokens) {
    weight_gradients(used_rows<R, Rows>(c), x, s, dy);
    input_gradient(used_rows<R, Rows>(c), x, s, dy, dx);
  }
  void backward_input(const context& c, const input_type& x, const output_type&, saved_type& s, const output_type& dy,
                      input_type& dx) const requires(R == rows::tokens) {
    input_gradient(used_rows<R, Rows>(c), x, s, dy, dx);
  }
  void backward_weight(const context& c, const input_type& x, const output_type&, const saved_type& s,
                       const output_type& dy) requires(R == rows::tokens) {
    weight_gradients(used_rows<R, Rows>(c), x, s, dy);
  }

 private:
  void forward_rows(std::size_t n, const input_type& x, output_type& y, saved_type& s) const {
    for (std::size_t r = 0; r < n; ++r)
      detail::layer_norm_row(x.v.data() + r * Cols, y.v.data() + r * Cols, &s.mean[r], &s.inv_std[r], params.data(),
                             Cols);
  }
  void weight_gradients(std::size_t n, const input_type& x, const saved_type& s, const output_type& dy) {
    for (std::size_t c = 0; c < Cols; ++c)
      detail::layer_norm_weight_column(c, n, x.v.data(), dy.v.data(), s.mean.data(), s.inv_std.data(), grads.data(),
                                       Cols);
  }
  void input_gradient(std::size_t n, const input_type& x, const saved_type& s, const output_type& dy,
                      input_type& dx) const {
    for (std::size_t r = 0; r < n; ++r)
      detail::layer_norm_input_row(x.v.data() + r * Cols, dy.v.data() + r * Cols, s.mean[r], s.inv_std[r],
                                   params.data(), dx.v.data() + r * Cols, Cols);
  }
};

}  // namespace ctpipe::layers
