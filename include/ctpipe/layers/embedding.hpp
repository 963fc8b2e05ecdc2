// Token and learned position embeddings for a microbatch of Batch sequences laid out token-major
// (row t * Batch + b is token t of sequence b), so that a microbatch of fewer tokens per sequence is
// a prefix of rows (rows::tokens: the extent is the microbatch's tokens, Batch times the tokens per
// sequence). Its backward has nothing to give its input (token ids) and splits into an empty I
// and a W that adds each row's gradient to its token's and its position's vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include <ctpipe/layers/dense.hpp>  // rows, row_kind, used_rows, uniform_fill
#include <ctpipe/model/context.hpp>
#include <ctpipe/model/parameter_tensors.hpp>

namespace ctpipe::layers {

/// Rows token ids (with rows::tokens, token-major: a microbatch uses its extent's first rows).
template <std::size_t Rows, rows R = rows::fixed>
struct token_ids : detail::row_kind<R, Rows> {
  static constexpr std::size_t rows = Rows;
  std::array<std::int32_t, Rows> v{};
  constexpr bool operator==(const token_ids&) const = default;
};

namespace detail {
// A microbatch's rows for a layer over Batch token-major sequences: its extent's, which must be a
// whole number of tokens per sequence.
template <rows R, std::size_t Rows, std::size_t Batch>
std::size_t sequence_rows(const context& c, const char* layer) {
  const std::size_t n = used_rows<R, Rows>(c);
  if (n % Batch != 0)
    throw std::invalid_argument(std::string("ctpipe::layers::") + layer + ": microbatch " +
                                std::to_string(c.microbatch) + " has extent " + std::to_string(n) +
                                ", not a multiple of its " + std::to_string(Batch) +
                                " sequences (the extent counts the tokens of all of them)");
  return n;
}
/// A token id outside the vocabulary (one function for every embedding's instantiation, host or
/// device).
[[noreturn]] inline void bad_token(int microbatch, std::size_t row, std::int32_t id, std::size_t vocab) {
  throw std::out_of_range("ctpipe::layers::embedding: microbatch " + std::to_string(microbatch) + ", row " +
                          std::to_string(row) + ": token id " + std::to_string(id) +
                          " is outside the vocabulary (0 to " + std::to_string(vocab - 1) + ")");
}
}  // namespace detail

/// y[t * Batch + b] = wte[id[t * Batch + b]] + wpe[t], for Tokens positions of Batch sequences and
/// a vocabulary of Vocab ids. Parameters: wte (Vocab x Width), then wpe (Tokens x Width). What it
/// shares in a group (ctpipe::shared_with) is wte: the table an output head of Vocab rows reads.
template <std::size_t Tokens, std::size_t Batch, std::size_t Vocab, std::size_t Width, rows R = rows::fixed>
struct embedding {
  static constexpr std::size_t row_count = Tokens * Batch;
  using input_type = token_ids<row_count, R>;
  using output_type = matrix<row_count, Width, R>;
  static constexpr double cost = 2.0 * static_cast<double>(row_count * Width);

  std::array<float, (Vocab + Tokens) * Width> params{};
  std::array<float, (Vocab + Tokens) * Width> grads{};
  static constexpr std::array parameter_tensors{parameter_tensor{"wte", {Vocab, Width}},
                                                parameter_tensor{"wpe", {Tokens, Width}}};

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }
  /// The token table: what a tied output head shares.
  static constexpr std::size_t shared_parameter_count = Vocab * Width;  // (what shared_parameters() holds)
  std::span<float> shared_parameters() { return std::span<float>(params).first(Vocab * Width); }
  std::span<float> shared_gradients() { return std::span<float>(grads).first(Vocab * Width); }

  /// Uniform initialisation of both tables with standard deviation `stddev` (GPT-2's 0.02 by
  /// default), from `seed`.
  void init(std::uint64_t seed, float stddev = 0.02f) { detail::uniform_fill(params, stddev * 1.7320508f, seed, 12); }

  void forward(const context& c, const input_type& x, output_type& y) const {
    const std::size_t n = detail::sequence_rows<R, row_count, Batch>(c, "embedding");
    for (std::size_t r = 0; r < n; ++r) {
      const float* tok = params.data() + token(c, x, r) * Width;
      const float* pos = params.data() + (Vocab + r / Batch) * Width;
      for (std::size_t k = 0; k < Width; ++k) y.v[r * Width + k] = tok[k] + pos[k];
    }
  }
  void backward(const context& c, const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    backward_weight(c, x, y, dy);
    backward_input(c, x, y, dy, dx);
  }
  /// Split backward, I: token ids have no gradient; nothing to do.
  void backward_input(const context&, const input_type&, const output_type&, const output_type&, input_type&) const {}
  /// Split backward, W: each row's gradient added to its token's and its position's vector, in row
  /// order.
  void backward_weight(const context& c, const input_type& x, const output_type&, const output_type& dy) {
    const std::size_t n = detail::sequence_rows<R, row_count, Batch>(c, "embedding");
    for (std::size_t r = 0; r < n; ++r) {
      float* tok = grads.data() + token(c, x, r) * Width;
      float* pos = grads.data() + (Vocab + r / Batch) * Width;
      for (std::size_t k = 0; k < Width; ++k) {
        tok[k] += dy.v[r * Width + k];
        pos[k] += dy.v[r * Width + k];
      }
    }
  }

 private:
  static std::size_t token(const context& c, const input_type& x, std::size_t r) {
    const std::int32_t id = x.v[r];
    if (id < 0 || static_cast<std::size_t>(id) >= Vocab) detail::bad_token(c.microbatch, r, id, Vocab);
    return static_cast<std::size_t>(id);
  }
};

}  // namespace ctpipe::layers
