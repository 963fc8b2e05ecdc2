// ctpipe::layers::causal_attention_qkv on a device: multi-head causal self-attention from the fused
// projection of queries, keys and values, each sequence's heads as one batch of products, the
// causal softmax and its gradient the host layer's own row functions, a thread per row. It keeps
// the probabilities in its saved state, as the host layer does.
//
// Over tokens, every product is made at the capacity's shapes. The rows past the extent hold
// whatever was there, so each product that sums over tokens reads its operands with those rows
// zeroed (a masked copy: the values in the forward; the queries, keys and the output's gradient in
// the backward), and the softmax kernels write zeros past the extent: what those rows hold never
// reaches a number in use.
#pragma once

#include <cmath>
#include <cstddef>

#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/causal_attention_qkv.hpp>  // the host layer's cost
#include <ctpipe/layers/detail/row_math.hpp>       // causal_softmax_row, causal_softmax_gradient_row
#include <ctpipe/layers/device/memory.hpp>

namespace ctpipe::layers::device {

namespace detail {
/// out[r][c] = in[r][offset + c] (`cols` columns of rows `ld` apart) where row r is in use, else 0.
struct masked_columns {
  const float* in;
  float* out;
  std::size_t ld, offset, cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t r = i / cols;
    out[i] = r < rows_in_use(extent, rows) ? in[r * ld + offset + i % cols] : 0.0f;
  }
};
/// Row q of the [sequence][head][query] rows of Tokens scores each: its causal softmax where its
/// query is in use, zeros past the extent.
struct attention_softmax {
  float* p;
  std::size_t tokens, batch, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t q) const {
    const std::size_t i = q % tokens;
    float* row = p + q * tokens;
    if (i < rows_in_use(extent, rows) / batch)
      ctpipe::layers::detail::causal_softmax_row(row, i, tokens);
    else
      for (std::size_t j = 0; j < tokens; ++j) row[j] = 0.0f;
  }
};
/// Row q of dP becomes dS (through the softmax of p's row q), zeros past the extent.
struct attention_softmax_gradient {
  const float* p;
  float* ds;
  std::size_t tokens, batch, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t q) const {
    const std::size_t i = q % tokens;
    float* row = ds + q * tokens;
    if (i < rows_in_use(extent, rows) / batch)
      ctpipe::layers::detail::causal_softmax_gradient_row(p + q * tokens, row, i, tokens);
    else
      for (std::size_t j = 0; j < tokens; ++j) row[j] = 0.0f;
  }
};
}  // namespace detail

/// Over Batch sequences of up to Tokens tokens, token-major (row t * Batch + b is token t of
/// sequence b): the input's columns are q, k and v (Width each), split into Heads heads; per
/// sequence and head, y = softmax(causal(q k^T / sqrt(Width / Heads))) v, as the host layer.
template <device_ops Ops, std::size_t Tokens, std::size_t Batch, std::size_t Width, std::size_t Heads,
          rows R = rows::fixed>
struct causal_attention_qkv {
  using host_layer = ctpipe::layers::causal_attention_qkv<Tokens, Batch, Width, Heads, R>;
  static constexpr std::size_t row_count = Tokens * Batch, head_width = Width / Heads;
  using input_type = matrix<row_count, 3 * Width, R>;
  using output_type = matrix<row_count, Width, R>;
  /// The probabilities: [sequence][head][query][key], zero above the diagonal and past the extent.
  using saved_type = ctpipe::cuda::tensor<float, Batch * Heads * Tokens * Tokens>;
  static constexpr double cost = host_layer::cost;

  /// Moves the layer's scratch memory to device d (ctpipe::layers::device::place).
  void place(int d) {
    forward_scratch_.place(d);
    backward_scratch_.place(d);
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y, saved_type& s) const {
    const int* e = extent_of<R>(c);
    const operand v = masked(c, x.data, 3 * Width, 2 * Width, forward_scratch_.data());  // the values
    for (std::size_t b = 0; b < Batch; ++b)  // scores: q k^T / sqrt(head width), each head
      Ops::gemm(c, {.m = Tokens,
                    .n = Tokens,
                    .k = head_width,
                    .a = q(x.data, b),
                    .lda = in_ld,
                    .b = q(x.data, b) + Width,
                    .ldb = in_ld,
                    .tb = true,
                    .c = probabilities(s.data, b),
                    .ldc = Tokens,
                    .alpha = scale(),
                    .count = Heads,
                    .stride_a = head_width,
                    .stride_b = head_width,
                    .stride_c = Tokens * Tokens});
    Ops::for_each(c, Batch * Heads * Tokens, detail::attention_softmax{s.data, Tokens, Batch, row_count, e});
    for (std::size_t b = 0; b < Batch; ++b)  // y = p v
      Ops::gemm(c, {.m = Tokens,
                    .n = head_width,
                    .k = Tokens,
                    .a = probabilities(s.data, b),
                    .lda = Tokens,
                    .b = v.at(b),
                    .ldb = v.ld(),
                    .c = y.data + b * Width,
                    .ldc = out_ld,
                    .count = Heads,
                    .stride_a = Tokens * Tokens,
                    .stride_b = head_width,
                    .stride_c = head_width});
  }
  /// dv = p^T dy; dp = dy v^T; ds = p (dp - rowsum(p dp)); dq = ds k / sqrt(hw); dk = ds^T q / sqrt(hw).
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const saved_type& s,
                const output_type& dy, input_type& dx) const {
    const int* e = extent_of<R>(c);
    float* const scratch = backward_scratch_.data();  // (tokens: masked q, k and dy), then dS
    const operand qm = masked(c, x.data, 3 * Width, 0, scratch);
    const operand km = masked(c, x.data, 3 * Width, Width, scratch + row_count * Width);
    const operand gm = masked(c, dy.data, Width, 0, scratch + 2 * row_count * Width);
    float* const ds = scratch + masked_rows * 3 * Width;
    for (std::size_t b = 0; b < Batch; ++b) {
      const float* p = probabilities(s.data, b);
      float* const dq = dx.data + b * 3 * Width;
      Ops::gemm(c, {.m = Tokens,
                    .n = head_width,
                    .k = Tokens,
                    .a = p,
                    .lda = Tokens,
                    .ta = true,
                    .b = gm.at(b),
                    .ldb = gm.ld(),
                    .c = dq + 2 * Width,
                    .ldc = in_ld,
                    .count = Heads,
                    .stride_a = Tokens * Tokens,
                    .stride_b = head_width,
                    .stride_c = head_width});  // dv
      Ops::gemm(c, {.m = Tokens,
                    .n = Tokens,
                    .k = head_width,
                    .a = gm.at(b),
                    .lda = gm.ld(),
                    .b = q(x.data, b) + 2 * Width,
                    .ldb = in_ld,
                    .tb = true,
                    .c = ds + b * Heads * Tokens * Tokens,
                    .ldc = Tokens,
                    .count = Heads,
                    .stride_a = head_width,
                    .stride_b = head_width,
                    .stride_c = Tokens * Tokens});  // dp
    }
    Ops::for_each(c, Batch * Heads * Tokens,
                  detail::attention_softmax_gradient{s.data, ds, Tokens, Batch, row_count, e});
    for (std::size_t b = 0; b < Batch; ++b) {
      const float* d = ds + b * Heads * Tokens * Tokens;
      float* const dq = dx.data + b * 3 * Width;
      Ops::gemm(c, {.m = Tokens,
                    .n = head_width,
                    .k = Tokens,
                    .a = d,
                    .lda = Tokens,
                    .b = km.at(b),
                    .ldb = km.ld(),
                    .c = dq,
                    .ldc = in_ld,
                    .alpha = scale(),
                    .count = Heads,
                    .stride_a = Tokens * Tokens,
                    .stride_b = head_width,
                    .stride_c = head_width});  // dq
      Ops::gemm(c, {.m = Tokens,
                    .n = head_width,
                    .k = Tokens,
                    .a = d,
                    .lda = Tokens,
                    .ta = true,
                    .b = qm.at(b),
                    .ldb = qm.ld(),
                    .c = dq + Width,
                    .ldc = in_ld,
                    .alpha = scale(),
                    .count = Heads,
                    .stride_a = Tokens * Tokens,
                    .stride_b = head_width,
                    .stride_c = head_width});  // dk
    }
  }

 private:
  static constexpr std::size_t in_ld = Batch * 3 * Width, out_ld = Batch * Width;
  // The rows a masked copy holds: all of them over tokens, none with rows of fixed size.
  static constexpr std::size_t masked_rows = R == rows::tokens ? row_count : 0;
  // An operand of a product over tokens: Width columns of rows `row_stride` apart from `p`; sequence
  // b's rows start b rows on and lie Batch rows apart.
  struct operand {
    const float* p;
    std::size_t row_stride;
    const float* at(std::size_t b) const { return p + b * row_stride; }
    std::size_t ld() const { return Batch * row_stride; }
  };
  // Width columns at `offset` of `from`'s rows (`row_stride` apart): over tokens, a copy in `scratch`
  // with the rows past the extent zeroed; with rows of fixed size, the tensor itself.
  static operand masked(const ctpipe::cuda::context& c, const float* from, std::size_t row_stride, std::size_t offset,
                        float* scratch) {
    if constexpr (R == rows::tokens) {
      Ops::for_each(c, row_count * Width,
                    detail::masked_columns{from, scratch, row_stride, offset, Width, row_count, c.extent});
      return {scratch, Width};
    } else {
      static_cast<void>(c), static_cast<void>(scratch);
      return {from + offset, row_stride};
    }
  }
  static float scale() { return 1.0f / std::sqrt(static_cast<float>(head_width)); }
  static const float* q(const float* x, std::size_t b) { return x + b * 3 * Width; }
  static float* probabilities(float* p, std::size_t b) { return p + b * Heads * Tokens * Tokens; }
  static const float* probabilities(const float* p, std::size_t b) { return p + b * Heads * Tokens * Tokens; }

  // The forward's masked values, and the backward's masked q, k, dy and its dS (a forward and a
  // backward of the layer may run at once, on a rank's two streams); no masked copies with rows of
  // fixed size.
  array<Ops> forward_scratch_{masked_rows * Width};
  array<Ops> backward_scratch_{masked_rows * 3 * Width + Batch * Heads * Tokens * Tokens};
};

}  // namespace ctpipe::layers::device
