// ctpipe::layers::linear on a device: y = x W^T + b as one matrix product on the task's stream,
// its backward split into I (dx = dy W) and W (dW += dy^T x, db += the column sums of dy), each
// one product; the full backward makes the same calls, so the bits agree. Parameters in device
// memory, laid out and named as the host layer's, so that a checkpoint of either loads into the
// other.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <ctpipe/layers/detail/row_math.hpp>  // add_column_sum
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/layers/linear.hpp>  // bias, the host layer's parameter names and initialisation

namespace ctpipe::layers::device {

namespace detail {
/// y's element i = the bias of its column.
struct bias_fill {
  float* y;
  const float* b;
  std::size_t cols;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const { y[i] = b[i % cols]; }
};
/// Column c of dy over the rows in use, added to db[c].
struct bias_gradient {
  const float* dy;
  float* db;
  std::size_t cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t c) const {
    ctpipe::layers::detail::add_column_sum(c, rows_in_use(extent, rows), dy, cols, db + c);
  }
};
}  // namespace detail

/// y = x W^T (+ b) for Rows rows of In features on a device, Ops's (ctpipe/cuda/ops.hpp); with
/// rows::tokens, of the microbatch's extent. Parameters W (Out x In) then b (Out, where B is
/// bias::yes), as ctpipe::layers::linear's; a shared group of them shares W.
template <device_ops Ops, std::size_t Rows, std::size_t In, std::size_t Out, bias B = bias::yes, rows R = rows::fixed>
struct linear {
  using host_layer = ctpipe::layers::linear<Rows, In, Out, B, R>;
  static constexpr std::size_t bias_size = host_layer::bias_size;
  static constexpr std::size_t size = Out * In + bias_size;
  using input_type = matrix<Rows, In, R>;
  using output_type = matrix<Rows, Out, R>;
  static constexpr double cost = host_layer::cost;
  static constexpr auto parameter_tensors = host_layer::parameter_tensors;
  static constexpr std::size_t shared_parameter_count = Out * In;

  array<Ops> params{size}, grads{size};

  std::span<float> parameters() { return params.span(); }
  std::span<float> gradients() { return grads.span(); }
  std::span<float> shared_parameters() { return params.span().first(Out * In); }
  std::span<float> shared_gradients() { return grads.span().first(Out * In); }

  /// Moves the layer's memory to device d (ctpipe::layers::device::place).
  void place(int d) {
    params.place(d);
    grads.place(d);
    masked_.place(d);
  }

  /// The host layer's initialisation (ctpipe::layers::linear::init), uploaded.
  void init(std::uint64_t seed, float scale = 1.0f) {
    const auto h = std::make_unique<host_layer>();  // (its arrays inline: not on the stack)
    h->init(seed, scale);
    params.upload(h->params);
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    float beta = 0.0f;
    if constexpr (B == bias::yes) {
      Ops::for_each(c, Rows * Out, detail::bias_fill{y.data, params.data() + Out * In, Out});
      beta = 1.0f;
    }
    Ops::gemm(c, {.m = Rows,
                  .n = Out,
                  .k = In,
                  .a = x.data,
                  .lda = In,
                  .b = params.data(),
                  .ldb = In,
                  .tb = true,
                  .c = y.data,
                  .ldc = Out,
                  .beta = beta});
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    backward_weight(c, x, y, dy);
    backward_input(c, x, y, dy, dx);
  }
  /// Split backward, I: dx = dy W.
  void backward_input(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                      input_type& dx) const {
    Ops::gemm(c, {.m = Rows,
                  .n = In,
                  .k = Out,
                  .a = dy.data,
                  .lda = Out,
                  .b = params.data(),
                  .ldb = In,
                  .c = dx.data,
                  .ldc = In});
  }
  /// Split backward, W: dW += dy^T x over the rows in use; db += their column sums (in row order).
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy) {
    const float* xs = x.data;
    const float* dys = dy.data;
    if constexpr (R == rows::tokens) {  // the rows past the extent, zeroed in copies
      Ops::for_each(c, Rows * In, masked_copy{x.data, masked_.data(), In, Rows, c.extent});
      Ops::for_each(c, Rows * Out, masked_copy{dy.data, masked_.data() + Rows * In, Out, Rows, c.extent});
      xs = masked_.data();
      dys = masked_.data() + Rows * In;
    }
    Ops::gemm(c, {.m = Out,
                  .n = In,
                  .k = Rows,
                  .a = dys,
                  .lda = Out,
                  .ta = true,
                  .b = xs,
                  .ldb = In,
                  .c = grads.data(),
                  .ldc = In,
                  .beta = 1.0f});
    if constexpr (B == bias::yes)
      Ops::for_each(c, Out, detail::bias_gradient{dy.data, grads.data() + Out * In, Out, Rows, extent_of<R>(c)});
  }

 private:
  // The weight gradient's operands with the rows past the extent zeroed (rows::tokens): x, then dy.
  array<Ops> masked_{R == rows::tokens ? Rows * (In + Out) : 0};
};

}  // namespace ctpipe::layers::device
