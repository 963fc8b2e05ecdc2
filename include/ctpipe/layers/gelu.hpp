// GELU for the CPU, in the tanh form GPT-2 uses (PyTorch's nn.GELU(approximate="tanh")):
// y = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), its tanh a rational approximation within
// 4e-7 (float's own rounding is 6e-8). No parameters; its backward reads its input, which the
// executor keeps, and computes nothing of the forward beyond the tanh it needs.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <ctpipe/layers/dense.hpp>  // matrix, rows, used_rows
#include <ctpipe/model/context.hpp>

namespace ctpipe::layers {

namespace detail {
/// tanh(x) in float as a rational function (odd degree 13 over even degree 6, the argument clamped
/// to +-7.9053, where tanh is within 3e-7 of +-1): within 4e-7 of tanh everywhere, with no branch and no
/// library call, so that a loop of it vectorizes. A GELU spends most of its time in tanh: the C
/// library's (through expm1f) took a third of a GPT's step on the CPU.
constexpr float tanh_rational(float x) noexcept {
  // |x| clamped on its bits (for floats of one sign the bits order as the values do): an integer
  // minimum, which vectorizes at -O2 where a float comparison (it may trap) does not. A NaN comes
  // out as +-1; the GELU's own factor x keeps it NaN.
  constexpr std::uint32_t limit = std::bit_cast<std::uint32_t>(7.90531110763549805f), sign = 0x80000000u;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x), magnitude = bits & ~sign;
  x = std::bit_cast<float>((magnitude < limit ? magnitude : limit) | (bits & sign));
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}
}  // namespace detail

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
    for (std::size_t i = 0; i < Cols; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + detail::tanh_rational(k0 * (v + k1 * v * v * v)));
    }
  }
  static void backward_row(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx) {
    for (std::size_t i = 0; i < Cols; ++i) {
      const float v = x[i];
      const float t = detail::tanh_rational(k0 * (v + k1 * v * v * v));
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * v * v));
    }
  }
};

}  // namespace ctpipe::layers
