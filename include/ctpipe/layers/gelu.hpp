// GELU for the CPU, in the tanh form GPT-2 uses (PyTorch's nn.GELU(approximate="tanh")):
// y = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). No parameters; its backward reads its
// input, which the executor keeps, and computes nothing of the forward beyond the tanh it needs.
#pragma once

#include <cmath>
#include <cstddef>

#include <ctpipe/layers/dense.hpp>  // matrix, rows, used_rows
#include <ctpipe/model/context.hpp>

namespace ctpipe::layers {

/// Element-wise GELU (tanh form) over Rows x Cols (with rows::tokens, over the microbatch's
/// extent's rows).
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct gelu {
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = 12.0 * static_cast<double>(Rows * Cols);
  static constexpr float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  static constexpr float k1 = 0.044715f;

  void forward(const context& c, const input_type& x, output_type& y) const {
    const std::size_t n = used_rows<R, Rows>(c) * Cols;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x.v[i];
      y.v[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
    }
  }
  /// dx = dy (1/2 (1 + t) + x/2 (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2)), t the forward's tanh.
  void backward(const context& c, const input_type& x, const output_type&, const output_type& dy,
                input_type& dx) const {
    const std::size_t n = used_rows<R, Rows>(c) * Cols;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x.v[i];
      const float t = std::tanh(k0 * (v + k1 * v * v * v));
      dx.v[i] = dy.v[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * v * v));
    }
  }
};

}  // namespace ctpipe::layers
