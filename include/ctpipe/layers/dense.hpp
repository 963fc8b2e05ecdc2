// Reference layers for the CPU: a dense layer with an optional ReLU, and softmax cross-entropy.
// Plain loops in a fixed order, so every run gives the same bits; they serve the quickstart, the
// tests, and users who want a known-good layer to check their own against.
#pragma once

#include <ctpipe/detail/index.hpp>  // ix

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ctpipe::layers {

/// A Rows x Cols row-major matrix of floats (a microbatch of Rows samples with Cols features).
template <std::size_t Rows, std::size_t Cols>
struct matrix {
  static constexpr std::size_t rows = Rows;
  static constexpr std::size_t cols = Cols;
  std::array<float, Rows * Cols> v{};
  constexpr float& operator()(std::size_t r, std::size_t c) { return v[r * Cols + c]; }
  constexpr float operator()(std::size_t r, std::size_t c) const { return v[r * Cols + c]; }
  constexpr bool operator==(const matrix&) const = default;
  /// Element-wise sum (a tensor read by several layers gets the sum of their gradients).
  constexpr matrix& operator+=(const matrix& o) {
    for (std::size_t i = 0; i < Rows * Cols; ++i) v[i] += o.v[i];
    return *this;
  }
};

enum class activation { none, relu };

namespace detail {
/// Fills `w` with floats uniform in (-bound, bound) from `seed` (xorshift; `salt` tells the layer
/// kinds' streams apart), the same bits on every machine.
inline void uniform_fill(std::span<float> w, float bound, std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + salt;
  for (float& x : w) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = bound * (static_cast<float>(s >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
  }
}
}  // namespace detail

/// y = act(x W^T + b) for a microbatch of `Batch` samples. Parameters: W (Out x In), then b (Out).
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu>
struct dense {
  using input_type = matrix<Batch, In>;
  using output_type = matrix<Batch, Out>;
  static constexpr double cost = 2.0 * static_cast<double>(Batch * In * Out);

  std::array<float, Out * In + Out> params{};
  std::array<float, Out * In + Out> grads{};

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }

  /// Deterministic He-uniform initialisation (bound sqrt(6 / In), biases 0) from `seed`.
  void init(std::uint64_t seed) {
    detail::uniform_fill(params, std::sqrt(6.0f / static_cast<float>(In)), seed, 1);
    for (std::size_t o = 0; o < Out; ++o) params[Out * In + o] = 0.0f;
  }

  void forward(const input_type& x, output_type& y) const {
    for (std::size_t b = 0; b < Batch; ++b)
      for (std::size_t o = 0; o < Out; ++o) {
        float z = params[Out * In + o];
        for (std::size_t i = 0; i < In; ++i) z += params[o * In + i] * x(b, i);
        y(b, o) = (Act == activation::relu && z < 0.0f) ? 0.0f : z;
      }
  }

  /// The full backward: weight gradients += dL/dW, dL/db; dx = dL/dx.
  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    const output_type dz = pre_activation_gradient(y, dy);
    add_weight_gradients(x, dz);
    input_gradient(dz, dx);
  }
  /// Split backward, I: dx only (the same arithmetic as backward, so the bits agree).
  void backward_input(const input_type&, const output_type& y, const output_type& dy, input_type& dx) const {
    input_gradient(pre_activation_gradient(y, dy), dx);
  }
  /// Split backward, W: the weight gradients only.
  void backward_weight(const input_type& x, const output_type& y, const output_type& dy) {
    add_weight_gradients(x, pre_activation_gradient(y, dy));
  }

 private:
  static output_type pre_activation_gradient(const output_type& y, const output_type& dy) {
    output_type dz;
    for (std::size_t b = 0; b < Batch; ++b)
      for (std::size_t o = 0; o < Out; ++o) dz(b, o) = (Act == activation::relu && y(b, o) <= 0.0f) ? 0.0f : dy(b, o);
    return dz;
  }
  void add_weight_gradients(const input_type& x, const output_type& dz) {
    for (std::size_t o = 0; o < Out; ++o) {
      float db = 0.0f;
      for (std::size_t b = 0; b < Batch; ++b) db += dz(b, o);
      grads[Out * In + o] += db;
      for (std::size_t i = 0; i < In; ++i) {
        float dw = 0.0f;
        for (std::size_t b = 0; b < Batch; ++b) dw += dz(b, o) * x(b, i);
        grads[o * In + i] += dw;
      }
    }
  }
  void input_gradient(const output_type& dz, input_type& dx) const {
    for (std::size_t b = 0; b < Batch; ++b)
      for (std::size_t i = 0; i < In; ++i) {
        float s = 0.0f;
        for (std::size_t o = 0; o < Out; ++o) s += params[o * In + i] * dz(b, o);
        dx(b, i) = s;
      }
  }
};

/// Mean softmax cross-entropy over a microbatch of `Batch` samples and `Classes` logits each.
template <std::size_t Batch, std::size_t Classes>
struct softmax_cross_entropy {
  using target_type = std::array<int, Batch>;  // the class of each sample

  double operator()(const matrix<Batch, Classes>& logits, const target_type& target,
                    matrix<Batch, Classes>& dlogits) const {
    double loss = 0.0;
    for (std::size_t b = 0; b < Batch; ++b) {
      float mx = logits(b, 0);
      for (std::size_t c = 1; c < Classes; ++c) mx = logits(b, c) > mx ? logits(b, c) : mx;
      float sum = 0.0f;
      for (std::size_t c = 0; c < Classes; ++c) sum += std::exp(logits(b, c) - mx);
      const auto t = ctpipe::detail::ix(target[b]);
      loss += static_cast<double>(std::log(sum) - (logits(b, t) - mx));
      for (std::size_t c = 0; c < Classes; ++c) {
        const float p = std::exp(logits(b, c) - mx) / sum;
        dlogits(b, c) = (p - (c == t ? 1.0f : 0.0f)) / static_cast<float>(Batch);
      }
    }
    return loss / static_cast<double>(Batch);
  }
};

}  // namespace ctpipe::layers
