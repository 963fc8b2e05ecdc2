// Reference layers for the CPU: a dense layer with an optional ReLU, and softmax cross-entropy.
// Plain loops in a fixed order, so every run gives the same bits; they serve the quickstart, the
// tests, and users who want a known-good layer to check their own against.
#pragma once

#include <ctpipe/detail/index.hpp>            // ix
#include <ctpipe/layers/detail/row_math.hpp>  // cross_entropy_row
#include <ctpipe/model/context.hpp>
#include <ctpipe/model/parameter_tensors.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace ctpipe::layers {

/// What a matrix's rows are: a fixed number of samples, or the tokens of one sequence, of which a
/// microbatch uses its own number (its extent: ctpipe/model/extent.hpp). A layer of `rows::tokens`
/// takes the task's context (ctpipe::context) and reads and writes only its first `extent` rows.
enum class rows { fixed, tokens };

namespace detail {
template <rows R, std::size_t N>
struct row_kind {
  constexpr bool operator==(const row_kind&) const = default;
};
template <std::size_t N>
struct row_kind<rows::tokens, N> {
  static constexpr std::size_t max_tokens = N;  // a token-major tensor (ctpipe::token_major)
  constexpr bool operator==(const row_kind&) const = default;
};
}  // namespace detail

/// A Rows x Cols row-major matrix of floats (a microbatch of Rows samples with Cols features, or,
/// with rows::tokens, up to Rows tokens of one sequence).
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct matrix : detail::row_kind<R, Rows> {
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

/// The rows a layer of `Rows` rows of kind R works on in the task of `c`: all of them (rows::fixed),
/// or the microbatch's extent (rows::tokens; all of them where the context names none).
template <rows R, std::size_t Rows>
constexpr std::size_t used_rows(const context& c) noexcept {
  if constexpr (R == rows::fixed)
    return Rows;
  else
    return c.extent <= 0 || static_cast<std::size_t>(c.extent) > Rows ? Rows : static_cast<std::size_t>(c.extent);
}

enum class activation { none, relu };

/// How a dense layer lays out its weights: Out x In (row o holds output o's weights), or In x Out
/// (row i holds input i's): the layout of dense<Batch, Out, In>'s weights, so that a layer from Out
/// back to In can share them (a tied output head: ctpipe::shared_with).
enum class weights { out_by_in, in_by_out };

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

/// y = act(x W^T + b) for a microbatch of `Batch` samples (with rows::tokens: of its extent's
/// tokens, the context's). Parameters: W (Out x In; with weights::in_by_out, In x Out), then b
/// (Out). What it shares in a group (ctpipe::shared_with) is W, not b.
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::relu, rows R = rows::fixed,
          weights Layout = weights::out_by_in>
struct dense {
  using input_type = matrix<Batch, In, R>;
  using output_type = matrix<Batch, Out, R>;
  static constexpr double cost = 2.0 * static_cast<double>(Batch * In * Out);

  std::array<float, Out * In + Out> params{};
  std::array<float, Out * In + Out> grads{};
  /// The tensors of params (and grads), in order: the weights, then the bias.
  static constexpr std::array parameter_tensors{
      parameter_tensor{"weight", {Layout == weights::out_by_in ? Out : In, Layout == weights::out_by_in ? In : Out}},
      parameter_tensor{"bias", {Out}}};

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }
  /// The weights without the bias: what a shared group of dense layers shares.
  static constexpr std::size_t shared_parameter_count = Out * In;  // (what shared_parameters() holds)
  std::span<float> shared_parameters() { return std::span<float>(params).first(Out * In); }
  std::span<float> shared_gradients() { return std::span<float>(grads).first(Out * In); }

  /// Deterministic He-uniform initialisation (bound sqrt(6 / In), biases 0) from `seed`.
  void init(std::uint64_t seed) {
    detail::uniform_fill(params, std::sqrt(6.0f / static_cast<float>(In)), seed, 1);
    for (std::size_t o = 0; o < Out; ++o) params[Out * In + o] = 0.0f;
  }

  void forward(const input_type& x, output_type& y) const requires(R == rows::fixed) { forward_rows(Batch, x, y); }
  /// The full backward: weight gradients += dL/dW, dL/db; dx = dL/dx.
  void backward(const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) requires(R == rows::fixed) {
    backward_rows(Batch, x, y, dy, dx);
  }
  /// Split backward, I: dx only (the same arithmetic as backward, so the bits agree).
  void backward_input(const input_type&, const output_type& y, const output_type& dy, input_type& dx) const
      requires(R == rows::fixed) {
    input_gradient(Batch, pre_activation_gradient(Batch, y, dy), dx);
  }
  /// Split backward, W: the weight gradients only.
  void backward_weight(const input_type& x, const output_type& y, const output_type& dy) requires(R == rows::fixed) {
    add_weight_gradients(Batch, x, pre_activation_gradient(Batch, y, dy));
  }

  /// The same four calls over the microbatch's extent (rows::tokens).
  void forward(const context& c, const input_type& x, output_type& y) const requires(R == rows::tokens) {
    forward_rows(used_rows<R, Batch>(c), x, y);
  }
  void backward(const context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) requires(R == rows::tokens) {
    backward_rows(used_rows<R, Batch>(c), x, y, dy, dx);
  }
  void backward_input(const context& c, const input_type&, const output_type& y, const output_type& dy,
                      input_type& dx) const requires(R == rows::tokens) {
    const std::size_t n = used_rows<R, Batch>(c);
    input_gradient(n, pre_activation_gradient(n, y, dy), dx);
  }
  void backward_weight(const context& c, const input_type& x, const output_type& y,
                       const output_type& dy) requires(R == rows::tokens) {
    const std::size_t n = used_rows<R, Batch>(c);
    add_weight_gradients(n, x, pre_activation_gradient(n, y, dy));
  }

 private:
  // Where the weight from input i to output o is.
  static constexpr std::size_t w(std::size_t o, std::size_t i) noexcept {
    return Layout == weights::out_by_in ? o * In + i : i * Out + o;
  }
  void forward_rows(std::size_t n, const input_type& x, output_type& y) const {
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t o = 0; o < Out; ++o) {
        float z = params[Out * In + o];
        for (std::size_t i = 0; i < In; ++i) z += params[w(o, i)] * x(b, i);
        y(b, o) = (Act == activation::relu && z < 0.0f) ? 0.0f : z;
      }
  }
  void backward_rows(std::size_t n, const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    const output_type dz = pre_activation_gradient(n, y, dy);
    add_weight_gradients(n, x, dz);
    input_gradient(n, dz, dx);
  }
  static output_type pre_activation_gradient(std::size_t n, const output_type& y, const output_type& dy) {
    output_type dz;
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t o = 0; o < Out; ++o) dz(b, o) = (Act == activation::relu && y(b, o) <= 0.0f) ? 0.0f : dy(b, o);
    return dz;
  }
  void add_weight_gradients(std::size_t n, const input_type& x, const output_type& dz) {
    for (std::size_t o = 0; o < Out; ++o) {
      float db = 0.0f;
      for (std::size_t b = 0; b < n; ++b) db += dz(b, o);
      grads[Out * In + o] += db;
      for (std::size_t i = 0; i < In; ++i) {
        float dw = 0.0f;
        for (std::size_t b = 0; b < n; ++b) dw += dz(b, o) * x(b, i);
        grads[w(o, i)] += dw;
      }
    }
  }
  void input_gradient(std::size_t n, const output_type& dz, input_type& dx) const {
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t i = 0; i < In; ++i) {
        float s = 0.0f;
        for (std::size_t o = 0; o < Out; ++o) s += params[w(o, i)] * dz(b, o);
        dx(b, i) = s;
      }
  }
};

/// A dense layer from In to Out whose weights are laid out as dense<Batch, Out, In>'s: the output
/// head that shares (ctpipe::shared_with) the weights of an input layer from Out to In.
template <std::size_t Batch, std::size_t In, std::size_t Out, activation Act = activation::none, rows R = rows::fixed>
using dense_transposed = dense<Batch, In, Out, Act, R, weights::in_by_out>;

namespace detail {
// A loss's target outside its classes (one function for every loss's instantiation).
[[noreturn]] inline void bad_target(int microbatch, bool samples, std::size_t row, int target, std::size_t classes) {
  std::string s = "ctpipe::layers::softmax_cross_entropy: ";
  if (microbatch >= 0) {
    s += "microbatch ";
    s += std::to_string(microbatch);
    s += ", ";
  }
  s += samples ? "sample " : "token ";
  s += std::to_string(row);
  s += ": target ";
  s += std::to_string(target);
  s += " is not a class (0 to ";
  s += std::to_string(classes - 1);
  s += ")";
  throw std::out_of_range(s);
}
}  // namespace detail

/// Softmax cross-entropy over a microbatch of `Batch` samples and `Classes` logits each: the mean
/// over the samples (rows::fixed). With rows::tokens, over the microbatch's extent's tokens (the
/// context's), and the sum over them, not the mean, its gradient unscaled: a step's per-token loss
/// is then the sum of its microbatches' losses over the sum of their extents (what the executors'
/// step with extents returns beside the losses), whatever each microbatch's length.
///
/// Every target it reads (all of them; with rows::tokens, those of the extent's tokens) must be a
/// class, 0 to Classes - 1: another is std::out_of_range naming the microbatch (where the call has
/// the context), the sample or token, and the target, thrown before anything is written (an
/// executor reports it as the task_failure of the stage that holds the loss).
template <std::size_t Batch, std::size_t Classes, rows R = rows::fixed>
struct softmax_cross_entropy {
  using target_type = std::array<int, Batch>;  // the class of each sample
  using logits_type = matrix<Batch, Classes, R>;
  /// Declared cost, in the dense layers' units (their forward's multiply-adds x 2): about 8 per
  /// logit for the softmax and its gradient (an exp among them). partition<Model, S, Loss>() counts
  /// it on the last stage.
  static constexpr double cost = 8.0 * static_cast<double>(Batch * Classes);

  double operator()(const logits_type& logits, const target_type& target, logits_type& dlogits) const
      requires(R == rows::fixed) {
    check_rows(Batch, target, -1);
    return rows_loss<true>(Batch, logits, target, dlogits) / static_cast<double>(Batch);
  }
  /// The same with the task's context (the executors and sequential_step call this one), whose
  /// microbatch a bad target's message names.
  double operator()(const context& c, const logits_type& logits, const target_type& target,
                    logits_type& dlogits) const {
    const std::size_t n = used_rows<R, Batch>(c);
    check_rows(n, target, c.microbatch);
    if constexpr (R == rows::fixed)
      return rows_loss<true>(Batch, logits, target, dlogits) / static_cast<double>(Batch);
    else
      return rows_loss<false>(n, logits, target, dlogits);
  }
  /// The check both calls make first, alone: for a device loss that wraps this one, to check a
  /// microbatch's targets where they are read on the host.
  static void check_targets(const context& c, const target_type& target) {
    check_rows(used_rows<R, Batch>(c), target, c.microbatch);
  }

 private:
  static void check_rows(std::size_t n, const target_type& target, int microbatch) {
    for (std::size_t b = 0; b < n; ++b)
      if (target[b] < 0 || static_cast<std::size_t>(target[b]) >= Classes)
        detail::bad_target(microbatch, R == rows::fixed, b, target[b], Classes);
  }
  // The sum of the first n rows' losses; each row's gradient p - onehot, over Batch for the mean.
  template <bool Mean>
  static double rows_loss(std::size_t n, const logits_type& logits, const target_type& target, logits_type& dlogits) {
    double loss = 0.0;
    for (std::size_t b = 0; b < n; ++b)
      loss += static_cast<double>(
          detail::cross_entropy_row(logits.v.data() + b * Classes, ctpipe::detail::ix(target[b]),
                                    dlogits.v.data() + b * Classes, Classes, Mean ? static_cast<float>(Batch) : 0.0f));
    return loss;
  }
};

}  // namespace ctpipe::layers
