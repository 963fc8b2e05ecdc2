// ctpipe::layers::layer_norm on a device: the same row and column functions, a thread per row
// (forward, and I: dx) or per column (W: the scale and shift gradients, rows in order). It keeps
// each row's mean and inverse deviation in its saved state (device memory the executor holds per
// microbatch in flight), so neither half of its backward computes them again.
#pragma once

#include <cstddef>
#include <vector>

#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/detail/row_math.hpp>
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/layers/layer_norm.hpp>  // the host layer's cost and parameter names

namespace ctpipe::layers::device {

namespace detail {
struct layer_norm_forward {
  const float* x;
  float* y;
  float* saved;  // the means (rows), then the inverse deviations (rows)
  const float* params;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t r) const {
    if (r < rows_in_use(extent, rows))
      ctpipe::layers::detail::layer_norm_row(x + r * cols, y + r * cols, saved + r, saved + rows + r, params, cols);
  }
};
struct layer_norm_input {
  const float* x;
  const float* dy;
  const float* saved;
  const float* params;
  float* dx;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t r) const {
    if (r < rows_in_use(extent, rows))
      ctpipe::layers::detail::layer_norm_input_row(x + r * cols, dy + r * cols, saved[r], saved[rows + r], params,
                                                   dx + r * cols, cols);
  }
};
struct layer_norm_weight {
  const float* x;
  const float* dy;
  const float* saved;
  float* grads;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t c) const {
    ctpipe::layers::detail::layer_norm_weight_column(c, rows_in_use(extent, rows), x, dy, saved, saved + rows, grads,
                                                     cols);
  }
};
}  // namespace detail

/// y = (x - mean) / sqrt(var + eps) * gamma + beta per row of Rows x Cols on a device (with
/// rows::tokens, per row of the extent). Parameters gamma (1) then beta (0), as the host layer's.
template <device_ops Ops, std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct layer_norm {
  using host_layer = ctpipe::layers::layer_norm<Rows, Cols, R>;
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  /// Each row's mean, then its 1 / sqrt(var + eps).
  using saved_type = ctpipe::cuda::tensor<float, 2 * Rows>;
  static constexpr double cost = host_layer::cost;
  static constexpr auto parameter_tensors = host_layer::parameter_tensors;

  array<Ops> params{2 * Cols}, grads{2 * Cols};
  layer_norm() { params.upload(host_layer{}.params); }

  /// Moves the layer's memory to device d (ctpipe::layers::device::place).
  void place(int d) {
    params.place(d);
    grads.place(d);
  }

  std::span<float> parameters() { return params.span(); }
  std::span<float> gradients() { return grads.span(); }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y, saved_type& s) const {
    Ops::for_each(c, Rows,
                  detail::layer_norm_forward{x.data, y.data, s.data, params.data(), Cols, Rows, extent_of<R>(c)});
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const saved_type& s,
                const output_type& dy, input_type& dx) {
    backward_weight(c, x, y, s, dy);
    input_gradient(c, x, s, dy, dx);
  }
  /// Split backward, I: dx only (the same arithmetic as backward).
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type&, saved_type& s,
                      const output_type& dy, input_type& dx) const {
    input_gradient(c, x, s, dy, dx);
  }
  /// Split backward, W: d gamma += sum over rows of dy * xhat, d beta += sum of dy.
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const saved_type& s,
                       const output_type& dy) {
    Ops::for_each(c, Cols,
                  detail::layer_norm_weight{x.data, dy.data, s.data, grads.data(), Cols, Rows, extent_of<R>(c)});
  }

 private:
  void input_gradient(const ctpipe::cuda::context& c, const input_type& x, const saved_type& s, const output_type& dy,
                      input_type& dx) const {
    Ops::for_each(
        c, Rows,
        detail::layer_norm_input{x.data, dy.data, s.data, params.data(), dx.data, Cols, Rows, extent_of<R>(c)});
  }
};

}  // namespace ctpipe::layers::device
