// ctpipe::layers::add on a device: the residual join y = a + b, a thread per element of the rows in
// use; its backward hands dy to both inputs.
#pragma once

#include <cstddef>
#include <tuple>

#include <ctpipe/layers/add.hpp>  // the host layer's cost
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::layers::device {

namespace detail {
struct add_forward {
  const float* a;
  const float* b;
  float* y;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (i / cols < rows_in_use(extent, rows)) y[i] = a[i] + b[i];
  }
};
struct add_backward {
  const float* dy;
  float* da;
  float* db;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (i / cols < rows_in_use(extent, rows)) da[i] = db[i] = dy[i];
  }
};
}  // namespace detail

/// y = a + b over Rows x Cols on a device (with rows::tokens, over the extent's rows).
template <device_ops Ops, std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
struct add {
  using input_type = ctpipe::tensors<matrix<Rows, Cols, R>, matrix<Rows, Cols, R>>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = ctpipe::layers::add<Rows, Cols, R>::cost;

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    Ops::for_each(c, Rows * Cols,
                  detail::add_forward{std::get<0>(x).data, std::get<1>(x).data, y.data, Cols, Rows, extent_of<R>(c)});
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    Ops::for_each(
        c, Rows * Cols,
        detail::add_backward{dy.data, std::get<0>(dx).data, std::get<1>(dx).data, Cols, Rows, extent_of<R>(c)});
  }
};

}  // namespace ctpipe::layers::device
