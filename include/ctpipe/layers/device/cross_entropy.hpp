// ctpipe::layers::softmax_cross_entropy on a device: the executors' device loss. A thread per row
// writes the row's gradient (the host layer's row function); one thread then adds the rows' losses
// in row order into the microbatch's loss, as the host layer does (the mean over the rows with
// rows::fixed, the sum over the extent's tokens with rows::tokens). A target that is not a class is
// found in a kernel: its row's loss and gradient are NaN, and report() (which the CUDA executor
// calls once the step is done) throws std::out_of_range naming the rank, stage, microbatch, token
// and target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/dense.hpp>  // the host loss: its cost and its message
#include <ctpipe/layers/detail/row_math.hpp>
#include <ctpipe/layers/device/fault.hpp>
#include <ctpipe/layers/device/memory.hpp>

namespace ctpipe::layers::device {

namespace detail {
struct cross_entropy_rows {
  const float* z;
  const std::int32_t* target;
  float* dz;
  std::size_t classes, rows;
  const int* extent;
  float divide;
  CTPIPE_HOST_DEVICE void operator()(std::size_t r) const {
    if (r >= rows_in_use(extent, rows)) return;
    const std::int32_t t = target[r];
    if (t < 0 || static_cast<std::size_t>(t) >= classes) {
      for (std::size_t c = 0; c < classes; ++c) dz[r * classes + c] = __builtin_nanf("");
      return;
    }
    (void)ctpipe::layers::detail::cross_entropy_row(z + r * classes, static_cast<std::size_t>(t), dz + r * classes,
                                                    classes, divide);
  }
};
struct cross_entropy_sum {
  const float* z;
  const std::int32_t* target;
  double* loss;
  std::size_t classes, rows;
  const int* extent;
  bool mean;
  CTPIPE_HOST_DEVICE void operator()(std::size_t) const {
    const std::size_t n = rows_in_use(extent, rows);
    double sum = 0.0;
    for (std::size_t r = 0; r < n; ++r) {
      const std::int32_t t = target[r];
      sum += t < 0 || static_cast<std::size_t>(t) >= classes
                 ? static_cast<double>(__builtin_nanf(""))
                 : static_cast<double>(ctpipe::layers::detail::cross_entropy_row(
                       z + r * classes, static_cast<std::size_t>(t), nullptr, classes, 0.0f));
    }
    *loss = mean ? sum / static_cast<double>(rows) : sum;
  }
};
}  // namespace detail

/// Softmax cross-entropy over Batch rows of Classes logits on a device: the mean over the rows
/// (rows::fixed) or the sum over the extent's tokens (rows::tokens), as the host loss.
template <device_ops Ops, std::size_t Batch, std::size_t Classes, rows R = rows::fixed>
struct softmax_cross_entropy {
  using host_loss = ctpipe::layers::softmax_cross_entropy<Batch, Classes, R>;
  using target_type = ctpipe::cuda::tensor<std::int32_t, Batch>;
  using logits_type = matrix<Batch, Classes, R>;
  static constexpr double cost = host_loss::cost;

  void operator()(const ctpipe::cuda::context& c, const logits_type& y, const target_type& t, logits_type& dy,
                  double* loss) const {
    const int* e = extent_of<R>(c);
    faults_.check(c, t.data, Batch, e, static_cast<int>(Classes));
    const float divide = R == rows::fixed ? static_cast<float>(Batch) : 0.0f;
    Ops::for_each(c, Batch, detail::cross_entropy_rows{y.data, t.data, dy.data, Classes, Batch, e, divide});
    Ops::for_each(c, 1, detail::cross_entropy_sum{y.data, t.data, loss, Classes, Batch, e, R == rows::fixed});
  }
  /// Throws what a kernel found in the steps since the last call (a target that is not a class):
  /// std::out_of_range, the host loss's message after the rank and stage. The CUDA executor calls it
  /// once a step is done.
  void report() {
    fault f;
    if (!faults_.take(f)) return;
    try {
      ctpipe::layers::detail::bad_target(f.microbatch, R == rows::fixed, static_cast<std::size_t>(f.row), f.value,
                                         Classes);
    } catch (const std::out_of_range& e) {
      throw std::out_of_range(fault_record<Ops>::where(f) + e.what());
    }
  }
  /// Moves the loss's memory to device d (the last stage's).
  void place(int d) { faults_.place(d); }

 private:
  mutable fault_record<Ops> faults_;
};

}  // namespace ctpipe::layers::device
