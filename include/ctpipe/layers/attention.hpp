// A reference causal self-attention for the CPU (multi-head, no output projection) that keeps what
// its backward needs: the queries, keys, values and attention probabilities of its forward, and,
// with split backward, the internal gradients its I computed, which its W reads instead of
// computing them again. Plain loops in a fixed order, so every run gives the same bits.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <ctpipe/layers/dense.hpp>  // matrix

namespace ctpipe::layers {

/// Multi-head causal self-attention over a microbatch of Rows = sequences x Tokens rows (each
/// sequence Tokens consecutive rows), Width features split into Heads heads: per sequence and head,
/// y = softmax(causal(q k^T / sqrt(Width / Heads))) v, with q = x Wq^T, k = x Wk^T, v = x Wv^T. No
/// output projection (follow it with a dense layer). Parameters: Wq, Wk, Wv (Width x Width each,
/// row o holds output o's weights). With rows::tokens the rows are one sequence (Tokens = Rows) of
/// which it attends over the microbatch's extent.
template <std::size_t Rows, std::size_t Width, std::size_t Tokens = Rows, std::size_t Heads = 1, rows R = rows::fixed>
struct causal_attention {
  static_assert(Tokens > 0 && Rows % Tokens == 0, "ctpipe::layers::causal_attention: Tokens must divide Rows");
  static_assert(Heads > 0 && Width % Heads == 0, "ctpipe::layers::causal_attention: Heads must divide Width");
  static_assert(
      R == rows::fixed || Tokens == Rows,
      "ctpipe::layers::causal_attention: with rows::tokens its rows are one sequence's tokens (Tokens = Rows)");
  static constexpr std::size_t sequences = Rows / Tokens, head_width = Width / Heads;
  using input_type = matrix<Rows, Width, R>;
  using output_type = matrix<Rows, Width, R>;
  using projection = matrix<Rows, Width, R>;
  /// Attention probabilities: [sequence][head][query][key].
  using probabilities = std::array<float, sequences * Heads * Tokens * Tokens>;
  /// The forward's q, k, v and probabilities; the I's gradients of q, k and v (for its W).
  struct saved_type {
    projection q, k, v;
    probabilities p{};
    projection dq, dk, dv;
    constexpr bool operator==(const saved_type&) const = default;
  };
  static constexpr double cost =
      2.0 * static_cast<double>(Rows * Width) * (3.0 * static_cast<double>(Width) + 2.0 * static_cast<double>(Tokens));
  static constexpr std::size_t weights = Width * Width;

  std::array<float, 3 * weights> params{};
  std::array<float, 3 * weights> grads{};
  /// The tensors of params (and grads), in order.
  static constexpr std::array parameter_tensors{parameter_tensor{"wq", {Width, Width}},
                                                parameter_tensor{"wk", {Width, Width}},
                                                parameter_tensor{"wv", {Width, Width}}};

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }

  /// Deterministic uniform initialisation (bound sqrt(3 / Width)) from `seed`.
  void init(std::uint64_t seed) { detail::uniform_fill(params, std::sqrt(3.0f / static_cast<float>(Width)), seed, 3); }

  void forward(const input_type& x, output_type& y, saved_type& s) const requires(R == rows::fixed) {
    forward_tokens(Tokens, x, y, s);
  }
  void backward(const input_type& x, const output_type&, const saved_type& s, const output_type& dy,
                input_type& dx) requires(R == rows::fixed) {
    backward_tokens(Tokens, x, s, dy, dx);
  }
  /// Split backward, I: dx, keeping the gradients of q, k and v in s for the W.
  void backward_input(const input_type&, const output_type&, saved_type& s, const output_type& dy, input_type& dx) const
      requires(R == rows::fixed) {
    input_tokens(Tokens, s, dy, dx);
  }
  /// Split backward, W: the weight gradients, from what the I kept.
  void backward_weight(const input_type& x, const output_type&, const saved_type& s,
                       const output_type&) requires(R == rows::fixed) {
    weight_gradients(Tokens, x, s.dq, s.dk, s.dv);
  }

  /// The same four calls over the microbatch's extent (rows::tokens).
  void forward(const context& c, const input_type& x, output_type& y, saved_type& s) const requires(R == rows::tokens) {
    forward_tokens(used_rows<R, Rows>(c), x, y, s);
  }
  void backward(const context& c, const input_type& x, const output_type&, const saved_type& s, const output_type& dy,
                input_type& dx) requires(R == rows::tokens) {
    backward_tokens(used_rows<R, Rows>(c), x, s, dy, dx);
  }
  void backward_input(const context& c, const input_type&, const output_type&, saved_type& s, const output_type& dy,
                      input_type& dx) const requires(R == rows::tokens) {
    input_tokens(used_rows<R, Rows>(c), s, dy, dx);
  }
  void backward_weight(const context& c, const input_type& x, const output_type&, const saved_type& s,
                       const output_type&) requires(R == rows::tokens) {
    weight_gradients(used_rows<R, Rows>(c), x, s.dq, s.dk, s.dv);
  }

 private:
  // Each sequence's first m tokens (m = Tokens but with rows::tokens).
  void forward_tokens(std::size_t m, const input_type& x, output_type& y, saved_type& s) const {
    project(m, 0, x, s.q);
    project(m, 1, x, s.k);
    project(m, 2, x, s.v);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
    for (std::size_t n = 0; n < sequences; ++n)
      for (std::size_t h = 0; h < Heads; ++h) {
        const std::size_t r0 = n * Tokens, c0 = h * head_width;
        for (std::size_t i = 0; i < m; ++i) {
          float mx = -INFINITY;
          for (std::size_t j = 0; j <= i; ++j) {
            float d = 0.0f;
            for (std::size_t c = 0; c < head_width; ++c) d += s.q(r0 + i, c0 + c) * s.k(r0 + j, c0 + c);
            p(s.p, n, h, i, j) = d * scale;
            mx = p(s.p, n, h, i, j) > mx ? p(s.p, n, h, i, j) : mx;
          }
          float sum = 0.0f;
          for (std::size_t j = 0; j <= i; ++j) {
            p(s.p, n, h, i, j) = std::exp(p(s.p, n, h, i, j) - mx);
            sum += p(s.p, n, h, i, j);
          }
          for (std::size_t j = 0; j < Tokens; ++j) p(s.p, n, h, i, j) = j <= i ? p(s.p, n, h, i, j) / sum : 0.0f;
          for (std::size_t c = 0; c < head_width; ++c) {
            float o = 0.0f;
            for (std::size_t j = 0; j <= i; ++j) o += p(s.p, n, h, i, j) * s.v(r0 + j, c0 + c);
            y(r0 + i, c0 + c) = o;
          }
        }
      }
  }

  void backward_tokens(std::size_t n, const input_type& x, const saved_type& s, const output_type& dy, input_type& dx) {
    projection dq, dk, dv;
    internal_gradients(n, s, dy, dq, dk, dv);
    weight_gradients(n, x, dq, dk, dv);
    input_gradient(n, dq, dk, dv, dx);
  }
  void input_tokens(std::size_t n, saved_type& s, const output_type& dy, input_type& dx) const {
    internal_gradients(n, s, dy, s.dq, s.dk, s.dv);
    input_gradient(n, s.dq, s.dk, s.dv, dx);
  }

  static float& p(probabilities& a, std::size_t n, std::size_t h, std::size_t i, std::size_t j) {
    return a[((n * Heads + h) * Tokens + i) * Tokens + j];
  }
  static float p(const probabilities& a, std::size_t n, std::size_t h, std::size_t i, std::size_t j) {
    return a[((n * Heads + h) * Tokens + i) * Tokens + j];
  }
  const float* w(std::size_t which) const { return params.data() + which * weights; }

  // The rows of each sequence's first n tokens.
  static bool used(std::size_t n, std::size_t row) { return row % Tokens < n; }

  void project(std::size_t n, std::size_t which, const input_type& x, projection& out) const {
    for (std::size_t t = 0; t < Rows; ++t)
      if (used(n, t))
        for (std::size_t o = 0; o < Width; ++o) {
          float z = 0.0f;
          for (std::size_t i = 0; i < Width; ++i) z += w(which)[o * Width + i] * x(t, i);
          out(t, o) = z;
        }
  }

  static void internal_gradients(std::size_t m, const saved_type& s, const output_type& dy, projection& dq,
                                 projection& dk, projection& dv) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
    for (std::size_t n = 0; n < sequences; ++n)
      for (std::size_t h = 0; h < Heads; ++h) {
        const std::size_t r0 = n * Tokens, c0 = h * head_width;
        for (std::size_t j = 0; j < m; ++j)
          for (std::size_t c = 0; c < head_width; ++c) {
            float d = 0.0f;
            for (std::size_t i = j; i < m; ++i) d += p(s.p, n, h, i, j) * dy(r0 + i, c0 + c);
            dv(r0 + j, c0 + c) = d;
          }
        std::array<float, Tokens * Tokens> ds{};
        for (std::size_t i = 0; i < m; ++i) {
          std::array<float, Tokens> dp{};
          float dot = 0.0f;
          for (std::size_t j = 0; j <= i; ++j) {
            for (std::size_t c = 0; c < head_width; ++c) dp[j] += dy(r0 + i, c0 + c) * s.v(r0 + j, c0 + c);
            dot += p(s.p, n, h, i, j) * dp[j];
          }
          for (std::size_t j = 0; j <= i; ++j) ds[i * Tokens + j] = p(s.p, n, h, i, j) * (dp[j] - dot) * scale;
        }
        for (std::size_t t = 0; t < m; ++t)
          for (std::size_t c = 0; c < head_width; ++c) {
            float gq = 0.0f, gk = 0.0f;
            for (std::size_t j = 0; j <= t; ++j) gq += ds[t * Tokens + j] * s.k(r0 + j, c0 + c);
            for (std::size_t i = t; i < m; ++i) gk += ds[i * Tokens + t] * s.q(r0 + i, c0 + c);
            dq(r0 + t, c0 + c) = gq;
            dk(r0 + t, c0 + c) = gk;
          }
      }
  }

  void weight_gradients(std::size_t n, const input_type& x, const projection& dq, const projection& dk,
                        const projection& dv) {
    const projection* d[3] = {&dq, &dk, &dv};
    for (std::size_t which = 0; which < 3; ++which)
      for (std::size_t o = 0; o < Width; ++o)
        for (std::size_t i = 0; i < Width; ++i) {
          float g = 0.0f;
          for (std::size_t t = 0; t < Rows; ++t)
            if (used(n, t)) g += (*d[which])(t, o) * x(t, i);
          grads[which * weights + o * Width + i] += g;
        }
  }

  void input_gradient(std::size_t n, const projection& dq, const projection& dk, const projection& dv,
                      input_type& dx) const {
    for (std::size_t t = 0; t < Rows; ++t)
      if (used(n, t))
        for (std::size_t i = 0; i < Width; ++i) {
          float g = 0.0f;
          for (std::size_t o = 0; o < Width; ++o)
            g += w(0)[o * Width + i] * dq(t, o) + w(1)[o * Width + i] * dk(t, o) + w(2)[o * Width + i] * dv(t, o);
          dx(t, i) = g;
        }
  }
};

}  // namespace ctpipe::layers
