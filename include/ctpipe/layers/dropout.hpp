// A reference dropout for the CPU that draws its mask from the task's context (ctpipe::context): the
// mask of one (step, microbatch, layer) is the same wherever and whenever it is drawn, so a
// pipelined step drops what a sequential step drops, and the backward draws the forward's mask
// again instead of keeping it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ctpipe/layers/dense.hpp>            // matrix
#include <ctpipe/layers/detail/row_math.hpp>  // dropped
#include <ctpipe/model/context.hpp>

namespace ctpipe::layers {

/// Zeroes each element with probability per_mille / 1000 (PerMille unless the run sets it) and
/// scales the others by 1 / (1 - p); at 0 it copies (and draws nothing). `stream`: which random
/// stream of the context it draws from (a seed of the run's choosing). With rows::tokens, over the
/// microbatch's extent (its draws are the first ones of the full matrix's).
template <std::size_t Rows, std::size_t Cols, unsigned PerMille, rows R = rows::fixed>
struct dropout {
  static_assert(PerMille < 1000, "ctpipe::layers::dropout: PerMille must be below 1000");
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = 1.0 * static_cast<double>(Rows * Cols);

  std::uint32_t stream = 0;
  /// The rate, in thousandths: PerMille, or what the run sets before its first step (below 1000).
  unsigned per_mille = PerMille;

  /// In training, drops; in a forward-only pass (ctx.training false), y = x.
  void forward(const context& ctx, const input_type& x, output_type& y) const {
    if (ctx.training && per_mille != 0)
      apply(ctx, x, y);
    else
      copy(ctx, x, y);
  }
  void backward(const context& ctx, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    if (per_mille != 0)
      apply(ctx, dy, dx);
    else
      copy(ctx, dy, dx);
  }

 private:
  // out = in * mask * keep_scale, the mask drawn element by element in row-major order.
  void apply(const context& ctx, const input_type& in, output_type& out) const {
    if (per_mille >= 1000)
      throw std::invalid_argument("ctpipe::layers::dropout: per_mille is " + std::to_string(per_mille) +
                                  "; a rate is below 1000 thousandths");
    auto random = ctx.random(stream);
    const std::size_t n = used_rows<R, Rows>(ctx) * Cols;
    const float rate = static_cast<float>(per_mille), keep_scale = 1000.0f / static_cast<float>(1000u - per_mille);
    for (std::size_t i = 0; i < n; ++i) out.v[i] = detail::dropped(random.next(), rate, keep_scale, in.v[i]);
  }
  static void copy(const context& ctx, const input_type& in, output_type& out) {
    const std::size_t n = used_rows<R, Rows>(ctx) * Cols;
    for (std::size_t i = 0; i < n; ++i) out.v[i] = in.v[i];
  }
};

}  // namespace ctpipe::layers
