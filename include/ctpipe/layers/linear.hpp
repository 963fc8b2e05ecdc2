// A linear layer on a BLAS: y = x W^T + b, the transformer's projections and its output head. Its
// backward splits into I (dx = dy W) and W (dW += dy^T x, db += the column sums of dy), each one
// matrix product, and the full backward makes the same two products, so the bits agree.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <ctpipe/layers/dense.hpp>  // matrix, rows, used_rows, uniform_fill
#include <ctpipe/layers/detail/cblas.hpp>
#include <ctpipe/model/context.hpp>
#include <ctpipe/model/parameter_tensors.hpp>

namespace ctpipe::layers {

/// Whether a linear layer adds a bias.
enum class bias { yes, no };

/// y = x W^T (+ b) for Rows rows of In features (with rows::tokens: the microbatch's extent's
/// rows; the others are neither read nor written). Parameters, laid out as torch.nn.Linear's: W
/// (Out x In, row o holds output o's weights), then b (Out) where B is bias::yes. What it shares in
/// a group (ctpipe::shared_with) is W: an output head of Out = vocabulary rows tied to an
/// embedding's table.
template <std::size_t Rows, std::size_t In, std::size_t Out, bias B = bias::yes, rows R = rows::fixed>
struct linear {
  static constexpr std::size_t bias_size = B == bias::yes ? Out : 0;
  using input_type = matrix<Rows, In, R>;
  using output_type = matrix<Rows, Out, R>;
  static constexpr double cost = 2.0 * static_cast<double>(Rows * In * Out);

  std::array<float, Out * In + bias_size> params{};
  std::array<float, Out * In + bias_size> grads{};
  static constexpr auto parameter_tensors = [] {
    if constexpr (B == bias::yes)
      return std::array{parameter_tensor{"weight", {Out, In}}, parameter_tensor{"bias", {Out}}};
    else
      return std::array{parameter_tensor{"weight", {Out, In}}};
  }();

  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }
  /// W without the bias: what a shared group of them shares.
  static constexpr std::size_t shared_parameter_count = Out * In;  // (what shared_parameters() holds)
  std::span<float> shared_parameters() { return std::span<float>(params).first(Out * In); }
  std::span<float> shared_gradients() { return std::span<float>(grads).first(Out * In); }

  /// Uniform initialisation, bound `scale` / sqrt(In) (scale 1: torch.nn.Linear's bound), biases 0,
  /// from `seed`: the same bits on every machine.
  void init(std::uint64_t seed, float scale = 1.0f) {
    detail::uniform_fill(std::span<float>(params).first(Out * In), scale / std::sqrt(static_cast<float>(In)), seed, 11);
    if constexpr (B == bias::yes)
      for (std::size_t o = 0; o < Out; ++o) params[Out * In + o] = 0.0f;
  }

  void forward(const context& c, const input_type& x, output_type& y) const {
    const std::size_t n = used_rows<R, Rows>(c);
    float beta = 0.0f;
    if constexpr (B == bias::yes) {
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t o = 0; o < Out; ++o) y.v[r * Out + o] = params[Out * In + o];
      beta = 1.0f;
    }
    detail::gemm(false, true, n, Out, In, 1.0f, x.v.data(), In, params.data(), In, beta, y.v.data(), Out);
  }
  void backward(const context& c, const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    backward_weight(c, x, y, dy);
    backward_input(c, x, y, dy, dx);
  }
  /// Split backward, I: dx = dy W.
  void backward_input(const context& c, const input_type&, const output_type&, const output_type& dy,
                      input_type& dx) const {
    detail::gemm(false, false, used_rows<R, Rows>(c), In, Out, 1.0f, dy.v.data(), Out, params.data(), In, 0.0f,
                 dx.v.data(), In);
  }
  /// Split backward, W: dW += dy^T x; db += the sum of dy's rows (in row order).
  void backward_weight(const context& c, const input_type& x, const output_type&, const output_type& dy) {
    const std::size_t n = used_rows<R, Rows>(c);
    if (n == 0) return;
    detail::gemm(true, false, Out, In, n, 1.0f, dy.v.data(), Out, x.v.data(), In, 1.0f, grads.data(), In);
    if constexpr (B == bias::yes) {
      // Each column summed in row order, as detail::add_column_sum (the device layer's) sums it, row
      // by row here so that the additions of a row vectorize.
      std::array<float, Out> sum{};
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t o = 0; o < Out; ++o) sum[o] += dy.v[r * Out + o];
      for (std::size_t o = 0; o < Out; ++o) grads[Out * In + o] += sum[o];
    }
  }
};

}  // namespace ctpipe::layers
