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
//
// In bf16 (precision::bf16) every product reads bf16: copies of q, k, v, the output's gradient, the
// probabilities and dS, rounded by a kernel before the product; the softmax, its gradient and every
// sum stay float, as does what it keeps.
#pragma once

#include <cmath>
#include <cstddef>

#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/causal_attention_qkv.hpp>  // the host layer's cost
#include <ctpipe/layers/detail/row_math.hpp>       // causal_softmax_row, causal_softmax_gradient_row
#include <ctpipe/layers/device/memory.hpp>

namespace ctpipe::layers::device {

namespace detail {
/// out[i] = in[i], rounded to T.
template <class T>
struct rounded {
  const float* in;
  T* out;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const { out[i] = T(in[i]); }
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
/// sequence and head, y = softmax(causal(q k^T / sqrt(Width / Heads))) v, as the host layer. P:
/// what its products read.
template <device_ops Ops, std::size_t Tokens, std::size_t Batch, std::size_t Width, std::size_t Heads,
          rows R = rows::fixed, precision P = precision::f32>
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
    ds_.place(d);
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y, saved_type& s) const {
    const int* e = extent_of<R>(c);
    const operand q = read<false>(c, x.data, 3 * Width, 0, forward_scratch_, 0);
    const operand k = read<false>(c, x.data, 3 * Width, Width, forward_scratch_, row_count * Width);
    const operand v = read<true>(c, x.data, 3 * Width, 2 * Width, forward_scratch_, mixed ? 2 * row_count * Width : 0);
    for (std::size_t b = 0; b < Batch; ++b)  // scores: q k^T / sqrt(head width), each head
      Ops::gemm(c, product{.m = Tokens,
                           .n = Tokens,
                           .k = head_width,
                           .a = q.at(b),
                           .lda = q.ld(),
                           .b = k.at(b),
                           .ldb = k.ld(),
                           .tb = true,
                           .c = probabilities(s.data, b),
                           .ldc = Tokens,
                           .alpha = scale(),
                           .count = Heads,
                           .stride_a = head_width,
                           .stride_b = head_width,
                           .stride_c = Tokens * Tokens});
    Ops::for_each(c, Batch * Heads * Tokens, detail::attention_softmax{s.data, Tokens, Batch, row_count, e});
    const E* const p = whole(c, s.data, forward_scratch_, 3 * masked_rows * Width);
    for (std::size_t b = 0; b < Batch; ++b)  // y = p v
      Ops::gemm(c, product{.m = Tokens,
                           .n = head_width,
                           .k = Tokens,
                           .a = probabilities(p, b),
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
    const operand qm = read<true>(c, x.data, 3 * Width, 0, backward_scratch_, 0);
    const operand km = read<true>(c, x.data, 3 * Width, Width, backward_scratch_, row_count * Width);
    const operand gm = read<true>(c, dy.data, Width, 0, backward_scratch_, 2 * row_count * Width);
    const operand v = read<false>(c, x.data, 3 * Width, 2 * Width, backward_scratch_, 3 * row_count * Width);
    const E* const p = whole(c, s.data, backward_scratch_, 4 * row_count * Width);
    float* const ds = ds_.data();
    for (std::size_t b = 0; b < Batch; ++b) {
      float* const dq = dx.data + b * 3 * Width;
      Ops::gemm(c, product{.m = Tokens,
                           .n = head_width,
                           .k = Tokens,
                           .a = probabilities(p, b),
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
      Ops::gemm(c, product{.m = Tokens,
                           .n = Tokens,
                           .k = head_width,
                           .a = gm.at(b),
                           .lda = gm.ld(),
                           .b = v.at(b),
                           .ldb = v.ld(),
                           .tb = true,
                           .c = probabilities(ds, b),
                           .ldc = Tokens,
                           .count = Heads,
                           .stride_a = head_width,
                           .stride_b = head_width,
                           .stride_c = Tokens * Tokens});  // dp
    }
    Ops::for_each(c, Batch * Heads * Tokens,
                  detail::attention_softmax_gradient{s.data, ds, Tokens, Batch, row_count, e});
    const E* const d = whole(c, ds, backward_scratch_, 4 * row_count * Width + probability_copy);
    for (std::size_t b = 0; b < Batch; ++b) {
      float* const dq = dx.data + b * 3 * Width;
      Ops::gemm(c, product{.m = Tokens,
                           .n = head_width,
                           .k = Tokens,
                           .a = probabilities(d, b),
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
      Ops::gemm(c, product{.m = Tokens,
                           .n = head_width,
                           .k = Tokens,
                           .a = probabilities(d, b),
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
  using E = operand_t<P>;
  using product = ctpipe::cuda::basic_product<E>;
  static constexpr bool mixed = P == precision::bf16;
  static constexpr std::size_t in_ld = Batch * 3 * Width, out_ld = Batch * Width,
                               probability_count = Batch * Heads * Tokens * Tokens;
  // The rows of Width columns each copy holds: all of them over tokens or in bf16, none with rows of
  // fixed size in single precision; and the probabilities' (or dS's) copy, in bf16 only.
  static constexpr std::size_t masked_rows = mixed || R == rows::tokens ? row_count : 0,
                               probability_copy = mixed ? probability_count : 0;
  // An operand of a product over tokens: Width columns of rows `row_stride` apart from `p`; sequence
  // b's rows start b rows on and lie Batch rows apart.
  struct operand {
    const E* p;
    std::size_t row_stride;
    const E* at(std::size_t b) const { return p + b * row_stride; }
    std::size_t ld() const { return Batch * row_stride; }
  };
  // Width columns at `offset` of `from`'s rows (`row_stride` apart), as a product reads them: in
  // bf16, a rounded copy at `at` in `scratch` with the rows past the extent zeroed; in single
  // precision, the tensor itself, but for a product that sums over tokens (SumsRows), which reads
  // such a copy.
  template <bool SumsRows>
  static operand read(const ctpipe::cuda::context& c, const float* from, std::size_t row_stride, std::size_t offset,
                      const array<Ops, E>& scratch, std::size_t at) {
    if constexpr (mixed || (SumsRows && R == rows::tokens)) {
      E* const to = scratch.data() + at;
      Ops::for_each(c, row_count * Width,
                    masked_as<E>{from, to, row_stride, offset, Width, row_count, extent_of<R>(c)});
      return {to, Width};
    } else {
      static_cast<void>(c), static_cast<void>(scratch), static_cast<void>(at);
      return {from + offset, row_stride};
    }
  }
  // Every sequence's and head's probabilities (or dS) at `from`, as a product reads them: in bf16, a
  // rounded copy at `at` in `scratch`; in single precision, themselves.
  static const E* whole(const ctpipe::cuda::context& c, const float* from, const array<Ops, E>& scratch,
                        std::size_t at) {
    if constexpr (mixed) {
      Ops::for_each(c, probability_count, detail::rounded<E>{from, scratch.data() + at});
      return scratch.data() + at;
    } else {
      static_cast<void>(c), static_cast<void>(scratch), static_cast<void>(at);
      return from;
    }
  }
  static float scale() { return 1.0f / std::sqrt(static_cast<float>(head_width)); }
  template <class T>
  static T* probabilities(T* p, std::size_t b) {
    return p + b * Heads * Tokens * Tokens;
  }

  // The forward's copies (over tokens, v; in bf16, q, k, v and p), the backward's (over tokens, q, k
  // and dy; in bf16 v, p and dS too) and its dS (a forward and a backward of the layer may run at
  // once, on a rank's two streams).
  array<Ops, E> forward_scratch_{mixed ? 3 * row_count * Width + probability_copy : masked_rows * Width};
  array<Ops, E> backward_scratch_{(mixed ? 4 : 3) * masked_rows * Width + 2 * probability_copy};
  array<Ops> ds_{probability_count};
};

}  // namespace ctpipe::layers::device
