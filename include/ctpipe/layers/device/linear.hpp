// ctpipe::layers::linear on a device: y = x W^T + b as one matrix product on the task's stream,
// its backward split into I (dx = dy W) and W (dW += dy^T x, db += the column sums of dy), each
// one product; the full backward makes the same calls, so the bits agree. Parameters in device
// memory, laid out and named as the host layer's, so that a checkpoint of either loads into the
// other. In bf16 (precision::bf16) its products read a bf16 compute copy of W and bf16 copies of x
// and dy, made by a kernel before each product; its parameters, gradients and outputs stay float.
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
#include <ctpipe/model/compute_copy.hpp>

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
/// bias::yes), as ctpipe::layers::linear's; a shared group of them shares W. P: what its products
/// read (precision::bf16: compute_parameters(), a bf16 copy of the parameters, which the device
/// optimizer rewrites after each update; model/compute_copy.hpp).
template <device_ops Ops, std::size_t Rows, std::size_t In, std::size_t Out, bias B = bias::yes, rows R = rows::fixed,
          precision P = precision::f32>
struct linear {
  using host_layer = ctpipe::layers::linear<Rows, In, Out, B, R>;
  static constexpr std::size_t bias_size = host_layer::bias_size;
  static constexpr std::size_t size = Out * In + bias_size;
  using input_type = matrix<Rows, In, R>;
  using output_type = matrix<Rows, Out, R>;
  static constexpr double cost = host_layer::cost;
  static constexpr auto parameter_tensors = host_layer::parameter_tensors;
  static constexpr std::size_t shared_parameter_count = Out * In;

  using operand = operand_t<P>;
  static constexpr bool mixed = P == precision::bf16;

  array<Ops> params{size}, grads{size};

  std::span<float> parameters() { return params.span(); }
  std::span<float> gradients() { return grads.span(); }
  std::span<float> shared_parameters() { return params.span().first(Out * In); }
  std::span<float> shared_gradients() { return grads.span().first(Out * In); }
  /// In bf16: the copy of parameters() its products read, element for element.
  std::span<bf16> compute_parameters() requires mixed { return compute_.span(); }
  /// In bf16: rewrites compute_parameters() from parameters() (setting-up only: the device optimizer
  /// rewrites it after each update itself).
  void write_compute_copy() {
    if constexpr (mixed) {
      const std::vector<float> w = params.download();
      std::vector<bf16> c(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) c[i] = to_compute<bf16>(w[i]);
      compute_.upload(c);
    }
  }

  /// Moves the layer's memory to device d (ctpipe::layers::device::place).
  void place(int d) {
    params.place(d);
    grads.place(d);
    compute_.place(d);
    scratch_.place(d);
  }

  /// The host layer's initialisation (ctpipe::layers::linear::init), uploaded.
  void init(std::uint64_t seed, float scale = 1.0f) {
    const auto h = std::make_unique<host_layer>();  // (its arrays inline: not on the stack)
    h->init(seed, scale);
    params.upload(h->params);
    write_compute_copy();
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    float beta = 0.0f;
    if constexpr (B == bias::yes) {
      Ops::for_each(c, Rows * Out, detail::bias_fill{y.data, params.data() + Out * In, Out});
      beta = 1.0f;
    }
    Ops::gemm(c, ctpipe::cuda::basic_product<operand>{.m = Rows,
                                                      .n = Out,
                                                      .k = In,
                                                      .a = read<false>(c, x.data, In, forward_at),
                                                      .lda = In,
                                                      .b = weights(),
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
    Ops::gemm(c, ctpipe::cuda::basic_product<operand>{.m = Rows,
                                                      .n = In,
                                                      .k = Out,
                                                      .a = read<false>(c, dy.data, Out, input_at),
                                                      .lda = Out,
                                                      .b = weights(),
                                                      .ldb = In,
                                                      .c = dx.data,
                                                      .ldc = In});
  }
  /// Split backward, W: dW += dy^T x over the rows in use; db += their column sums (in row order).
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy) {
    const operand* xs = read<true>(c, x.data, In, weight_at);
    const operand* dys = read<true>(c, dy.data, Out, weight_at + Rows * In);
    Ops::gemm(c, ctpipe::cuda::basic_product<operand>{.m = Out,
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
  // Scratch, in operands: in bf16, x's copy for the forward, dy's for the input gradient, and x's
  // then dy's for the weight gradient (a forward, an I and a W of the layer may run at once, on a
  // rank's two streams); in single precision, only the weight gradient's copies over tokens (with
  // the rows past the extent zeroed). The products read the tensors themselves where there is none.
  static constexpr std::size_t forward_at = 0, input_at = mixed ? Rows * In : 0,
                               weight_at = mixed ? Rows * (In + Out) : 0;
  static constexpr std::size_t scratch_size = mixed || R == rows::tokens ? weight_at + Rows * (In + Out) : 0;

  const operand* weights() const {
    if constexpr (mixed)
      return compute_.data();
    else
      return params.data();
  }
  // `cols` columns of the Rows rows at `from`, as a product reads them: in bf16, a rounded copy at
  // scratch offset `at`, the rows past the extent zeroed; in single precision, the tensor itself,
  // but for a product that sums over the rows (SumsRows) over tokens, which reads such a copy.
  template <bool SumsRows>
  const operand* read(const ctpipe::cuda::context& c, const float* from, std::size_t cols, std::size_t at) const {
    if constexpr (mixed || (SumsRows && R == rows::tokens)) {
      Ops::for_each(c, Rows * cols,
                    masked_as<operand>{from, scratch_.data() + at, cols, 0, cols, Rows, extent_of<R>(c)});
      return scratch_.data() + at;
    } else {
      static_cast<void>(c), static_cast<void>(cols), static_cast<void>(at);
      return from;
    }
  }

  array<Ops, bf16> compute_{mixed ? size : 0};
  array<Ops, operand> scratch_{scratch_size};
};

}  // namespace ctpipe::layers::device
