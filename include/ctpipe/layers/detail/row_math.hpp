// The transformer layers' arithmetic outside their matrix products, one function per row, column
// or element, each CTPIPE_HOST_DEVICE: the host layers (ctpipe/layers/) loop over them, the device
// layers (ctpipe/layers/device/) run them a thread per row, column or element, so that both do the
// same operations in the same order (the one source of each formula). Plain arithmetic on
// pointers: no library call a GPU lacks, no std:: function a kernel cannot call.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <ctpipe/config.hpp>         // CTPIPE_HOST_DEVICE
#include <ctpipe/model/context.hpp>  // counter_random

namespace ctpipe::layers::detail {

/// tanh(x) in float as a rational function (odd degree 13 over even degree 6, the argument clamped
/// to +-7.9053, where tanh is within 3e-7 of +-1): within 4e-7 of tanh everywhere, with no branch and no
/// library call, so that a loop of it vectorizes. A GELU spends most of its time in tanh: the C
/// library's (through expm1f) took a third of a GPT's step on the CPU.
CTPIPE_HOST_DEVICE constexpr float tanh_rational(float x) noexcept {
  // |x| clamped on its bits (for floats of one sign the bits order as the values do): an integer
  // minimum, which vectorizes at -O2 where a float comparison (it may trap) does not. A NaN comes
  // out as +-1; the GELU's own factor x keeps it NaN. (__builtin_bit_cast: std::bit_cast is not a
  // device function.)
  constexpr std::uint32_t limit = __builtin_bit_cast(std::uint32_t, 7.90531110763549805f), sign = 0x80000000u;
  const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, x), magnitude = bits & ~sign;
  x = __builtin_bit_cast(float, (magnitude < limit ? magnitude : limit) | (bits & sign));
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

inline constexpr float gelu_k0 = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float gelu_k1 = 0.044715f;

/// GELU in the tanh form GPT-2 uses: x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
CTPIPE_HOST_DEVICE constexpr float gelu(float v) noexcept {
  return 0.5f * v * (1.0f + tanh_rational(gelu_k0 * (v + gelu_k1 * v * v * v)));
}
/// Its input gradient: dy (1/2 (1 + t) + x/2 (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2)), t the
/// forward's tanh.
CTPIPE_HOST_DEVICE constexpr float gelu_gradient(float v, float dy) noexcept {
  const float t = tanh_rational(gelu_k0 * (v + gelu_k1 * v * v * v));
  return dy * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * gelu_k0 * (1.0f + 3.0f * gelu_k1 * v * v));
}

/// Dropout of one element from its 32 random bits: 0 where the bits' uniform float, in thousandths,
/// is below `rate` (per mille), else x * keep_scale (1000 / (1000 - rate)).
CTPIPE_HOST_DEVICE constexpr float dropped(std::uint32_t bits, float rate, float keep_scale, float x) noexcept {
  return counter_random::to_uniform(bits) * 1000.0f < rate ? 0.0f : x * keep_scale;
}

/// Query i's row of causal attention probabilities, in place: row[0..i] (the scaled scores) become
/// their softmax, row[i + 1..end) zeros.
CTPIPE_HOST_DEVICE inline void causal_softmax_row(float* row, std::size_t i, std::size_t end) {
  float mx = row[0];
  for (std::size_t j = 1; j <= i; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.0f;
  for (std::size_t j = 0; j <= i; ++j) {
    row[j] = expf(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (std::size_t j = 0; j <= i; ++j) row[j] *= inv;
  for (std::size_t j = i + 1; j < end; ++j) row[j] = 0.0f;
}
/// Its gradient through the softmax, in place: row (dP on entry) becomes dS = p (dp - sum(p dp))
/// over [0..i], zeros over [i + 1..end).
CTPIPE_HOST_DEVICE inline void causal_softmax_gradient_row(const float* p, float* row, std::size_t i, std::size_t end) {
  float dot = 0.0f;
  for (std::size_t j = 0; j <= i; ++j) dot += p[j] * row[j];
  for (std::size_t j = 0; j <= i; ++j) row[j] = p[j] * (row[j] - dot);
  for (std::size_t j = i + 1; j < end; ++j) row[j] = 0.0f;
}

/// One row of softmax cross-entropy over `classes` logits z with target class t: returns the row's
/// loss, log(sum exp(z - max)) - (z[t] - max); where dz is given, writes the gradient softmax - onehot,
/// divided by `divide` where it is not 0 (a loss that takes the mean).
CTPIPE_HOST_DEVICE inline float cross_entropy_row(const float* z, std::size_t t, float* dz, std::size_t classes,
                                                  float divide) {
  float mx = z[0];
  for (std::size_t c = 1; c < classes; ++c) mx = z[c] > mx ? z[c] : mx;
  float sum = 0.0f;
  for (std::size_t c = 0; c < classes; ++c) sum += expf(z[c] - mx);
  if (dz)
    for (std::size_t c = 0; c < classes; ++c) {
      const float p = expf(z[c] - mx) / sum;
      const float d = p - (c == t ? 1.0f : 0.0f);
      dz[c] = divide != 0.0f ? d / divide : d;
    }
  return logf(sum) - (z[t] - mx);
}

/// A layer norm's epsilon.
inline constexpr float layer_norm_eps = 1e-5f;

/// One row of a layer norm over `cols` values: y = (x - mean) / sqrt(var + eps) * gamma + beta,
/// params gamma (cols) then beta (cols); keeps the row's mean and 1 / sqrt(var + eps). The sums in
/// column order.
CTPIPE_HOST_DEVICE inline void layer_norm_row(const float* x, float* y, float* mean_out, float* inv_std_out,
                                              const float* params, std::size_t cols) {
  float sum = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) sum += x[c];
  const float mean = sum / static_cast<float>(cols);
  float var = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) var += (x[c] - mean) * (x[c] - mean);
  const float inv_std = 1.0f / sqrtf(var / static_cast<float>(cols) + layer_norm_eps);
  *mean_out = mean;
  *inv_std_out = inv_std;
  for (std::size_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * inv_std * params[c] + params[cols + c];
}
/// One row of its input gradient from the kept statistics:
/// dx = inv_std (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy gamma.
CTPIPE_HOST_DEVICE inline void layer_norm_input_row(const float* x, const float* dy, float mean, float inv_std,
                                                    const float* params, float* dx, std::size_t cols) {
  float sum = 0.0f, dot = 0.0f;
  for (std::size_t c = 0; c < cols; ++c) {
    const float g = dy[c] * params[c];
    sum += g;
    dot += g * (x[c] - mean) * inv_std;
  }
  const float n = static_cast<float>(cols);
  for (std::size_t c = 0; c < cols; ++c) {
    const float xhat = (x[c] - mean) * inv_std;
    dx[c] = inv_std * (dy[c] * params[c] - sum / n - xhat * dot / n);
  }
}
/// Column c of its weight gradients over `rows` rows of `cols` (rows in order): d gamma[c] +=
/// sum dy xhat, d beta[c] += sum dy.
CTPIPE_HOST_DEVICE inline void layer_norm_weight_column(std::size_t c, std::size_t rows, const float* x,
                                                        const float* dy, const float* mean, const float* inv_std,
                                                        float* grads, std::size_t cols) {
  float dg = 0.0f, db = 0.0f;
  for (std::size_t r = 0; r < rows; ++r) {
    dg += dy[r * cols + c] * (x[r * cols + c] - mean[r]) * inv_std[r];
    db += dy[r * cols + c];
  }
  grads[c] += dg;
  grads[cols + c] += db;
}

/// Column c of `rows` rows of `cols` summed in row order, added to *out (a bias's gradient).
CTPIPE_HOST_DEVICE inline void add_column_sum(std::size_t c, std::size_t rows, const float* m, std::size_t cols,
                                              float* out) {
  float sum = 0.0f;
  for (std::size_t r = 0; r < rows; ++r) sum += m[r * cols + c];
  *out += sum;
}

}  // namespace ctpipe::layers::detail
