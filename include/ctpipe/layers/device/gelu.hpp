// ctpipe::layers::gelu on a device: the same per-element function (tanh form, its tanh a rational
// approximation within 4e-7), a thread per element of the rows in use.
#pragma once

#include <cstddef>

#include <ctpipe/layers/detail/row_math.hpp>  // gelu, gelu_gradient
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/layers/gelu.hpp>  // the host layer's cost

namespace ctpipe::layers::device {

namespace detail {
struct gelu_forward {
  const float* x;
  float* y;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (i / cols < rows_in_use(extent, rows)) y[i] = ctpipe::layers::detail::gelu(x[i]);
  }
};
struct gelu_backward {
  const float* x;
  const float* dy;
  float* dx;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (i / cols < rows_in_use(extent, rows)) dx[i] = ctpipe::layers::detail::gelu_gradient(x[i], dy[i]);
  }
};
}  // namespace detail

/// Element-wise GELU over Rows x Cols on a device (with rows::tokens, over the extent's rows).
template <device_ops Ops, std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct gelu {
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = ctpipe::layers::gelu<Rows, Cols, R>::cost;

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    Ops::for_each(c, Rows * Cols, detail::gelu_forward{x.data, y.data, Cols, Rows, extent_of<R>(c)});
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy,
                input_type& dx) const {
    Ops::for_each(c, Rows * Cols, detail::gelu_backward{x.data, dy.data, dx.data, Cols, Rows, extent_of<R>(c)});
  }
};

}  // namespace ctpipe::layers::device
