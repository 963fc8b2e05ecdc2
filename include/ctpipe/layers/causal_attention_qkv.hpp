// Multi-head causal self-attention on a BLAS, from the fused projection of queries, keys and values
// (a linear layer from Width to 3 Width before it, the output projection after it: GPT-2's block).
// It keeps the attention probabilities of its forward for its backward, which computes nothing of
// the forward again. No parameters: its whole backward is the input gradient (I).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

#include <ctpipe/layers/dense.hpp>  // matrix, rows
#include <ctpipe/layers/detail/cblas.hpp>
#include <ctpipe/layers/detail/row_math.hpp>  // causal_softmax_row, causal_softmax_gradient_row
#include <ctpipe/layers/embedding.hpp>        // detail::sequence_rows
#include <ctpipe/model/context.hpp>

namespace ctpipe::layers {

/// Over Batch sequences of up to Tokens tokens laid out token-major (row t * Batch + b is token t of
/// sequence b; with rows::tokens, each sequence's first extent / Batch tokens): the input's columns
/// are q (0 to Width), k (Width to 2 Width) and v (2 Width to 3 Width), each split into Heads heads
/// of Width / Heads; per sequence and head, y = softmax(causal(q k^T / sqrt(Width / Heads))) v, the
/// heads side by side in y's Width columns.
template <std::size_t Tokens, std::size_t Batch, std::size_t Width, std::size_t Heads, rows R = rows::fixed>
struct causal_attention_qkv {
  static_assert(Heads > 0 && Width % Heads == 0,
                "ctpipe::layers::causal_attention_qkv: Heads must divide Width (each head has Width / Heads features)");
  static constexpr std::size_t row_count = Tokens * Batch, head_width = Width / Heads;
  using input_type = matrix<row_count, 3 * Width, R>;
  using output_type = matrix<row_count, Width, R>;
  /// The attention probabilities of the forward: [sequence][head][query][key], zero above the
  /// diagonal.
  struct saved_type {
    std::array<float, Batch * Heads * Tokens * Tokens> p{};
    constexpr bool operator==(const saved_type&) const = default;
  };
  static constexpr double cost = 4.0 * static_cast<double>(row_count * Tokens * Width);

  void forward(const context& c, const input_type& x, output_type& y, saved_type& s) const {
    const std::size_t t = detail::sequence_rows<R, row_count, Batch>(c, "causal_attention_qkv") / Batch;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
    for (std::size_t b = 0; b < Batch; ++b)
      for (std::size_t h = 0; h < Heads; ++h) {
        float* p = probabilities(s, b, h);
        // p = q k^T / sqrt(head width), then a causal softmax over each row.
        detail::gemm(false, true, t, t, head_width, scale, q(x, b, h), in_ld, k(x, b, h), in_ld, 0.0f, p, Tokens);
        for (std::size_t i = 0; i < t; ++i) detail::causal_softmax_row(p + i * Tokens, i, t);
        // y = p v
        detail::gemm(false, false, t, head_width, t, 1.0f, p, Tokens, v(x, b, h), in_ld, 0.0f,
                     y.v.data() + b * Width + h * head_width, out_ld);
      }
  }
  /// dv = p^T dy; dp = dy v^T; ds = p (dp - rowsum(p dp)); dq = ds k / sqrt(hw); dk = ds^T q / sqrt(hw).
  void backward(const context& c, const input_type& x, const output_type&, const saved_type& s, const output_type& dy,
                input_type& dx) const {
    const std::size_t t = detail::sequence_rows<R, row_count, Batch>(c, "causal_attention_qkv") / Batch;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
    std::vector<float> ds(Tokens * Tokens);
    for (std::size_t b = 0; b < Batch; ++b)
      for (std::size_t h = 0; h < Heads; ++h) {
        const float* p = probabilities(s, b, h);
        const float* g = dy.v.data() + b * Width + h * head_width;
        float* dq = dx.v.data() + b * 3 * Width + h * head_width;
        detail::gemm(true, false, t, head_width, t, 1.0f, p, Tokens, g, out_ld, 0.0f, dq + 2 * Width, in_ld);
        detail::gemm(false, true, t, t, head_width, 1.0f, g, out_ld, v(x, b, h), in_ld, 0.0f, ds.data(), Tokens);
        for (std::size_t i = 0; i < t; ++i)
          detail::causal_softmax_gradient_row(p + i * Tokens, ds.data() + i * Tokens, i, t);
        detail::gemm(false, false, t, head_width, t, scale, ds.data(), Tokens, k(x, b, h), in_ld, 0.0f, dq, in_ld);
        detail::gemm(true, false, t, head_width, t, scale, ds.data(), Tokens, q(x, b, h), in_ld, 0.0f, dq + Width,
                     in_ld);
      }
  }

 private:
  static constexpr std::size_t in_ld = Batch * 3 * Width, out_ld = Batch * Width;
  static const float* q(const input_type& x, std::size_t b, std::size_t h) {
    return x.v.data() + b * 3 * Width + h * head_width;
  }
  static const float* k(const input_type& x, std::size_t b, std::size_t h) { return q(x, b, h) + Width; }
  static const float* v(const input_type& x, std::size_t b, std::size_t h) { return q(x, b, h) + 2 * Width; }
  static float* probabilities(saved_type& s, std::size_t b, std::size_t h) {
    return s.p.data() + (b * Heads + h) * Tokens * Tokens;
  }
  static const float* probabilities(const saved_type& s, std::size_t b, std::size_t h) {
    return s.p.data() + (b * Heads + h) * Tokens * Tokens;
  }
};

}  // namespace ctpipe::layers
