// GELU for the CPU, in the tanh form GPT-2 uses (PyTorch's nn.GELU(approximate="tanh")):
// y = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), its tanh a rational approximation within
// 4e-7 (float's own rounding is 6e-8). No parameters; its backward reads its input, which the
// executor keeps, and computes nothing of the forward beyond the tanh it needs.
#pragma once

#include <cstddef>

#include <ctpipe/layers/dense.hpp>            // matrix, rows, used_rows
#include <ctpipe/layers/detail/row_math.hpp>  // gelu, gelu_gradient (tanh_rational)
#include <ctpipe/model/context.hpp>

namespace ctpipe::layers {

/// Element-wise GELU (tanh form) over Rows x Cols (with rows::tokens, over the microbatch's
/// extent's rows).
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct gelu {
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = 12.0 * static_cast<double>(Rows * Cols);

  void forward(const context& c, const input_type& x, output_type& y) const {
    const std::size_t n = used_rows<R, Rows>(c);
    for (std::size_t r = 0; r < n; ++r) forward_row(x.v.data() + r * Cols, y.v.data() + r * Cols);
  }
  /// dx = dy (1/2 (1 + t) + x/2 (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2)), t the forward's tanh.
  void backward(const context& c, const input_type& x, const output_type&, const output_type& dy,
                input_type& dx) const {
    const std::size_t n = used_rows<R, Rows>(c);
    for (std::size_t r = 0; r < n; ++r)
      backward_row(x.v.data() + r * Cols, dy.v.data() + r * Cols, dx.v.data() + r * Cols);
  }

 private:
  // One row at a time, of a length known at compile time and pointers that do not alias, so that
  // the compiler vectorizes the loop even at -O2.
  static void forward_row(const float* __restrict__ x, float* __restrict__ y) {
    for (std::size_t i = 0; i < Cols; ++i) y[i] = detail::gelu(x[i]);
  }
  static void backward_row(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx) {
    for (std::size_t i = 0; i < Cols; ++i) dx[i] = detail::gelu_gradient(x[i], dy[i]);
  }
};

}  // namespace ctpipe::layers
