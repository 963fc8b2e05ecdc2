// ctpipe::layers::dropout on a device: element i of the rows in use drops on the task's random
// stream's number i (ctpipe::counter_random::at), which the host layer's loop draws as its i-th: the
// same mask on the host and the device, drawn again by the backward instead of kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ctpipe/layers/detail/row_math.hpp>  // dropped
#include <ctpipe/layers/device/memory.hpp>
#include <ctpipe/layers/dropout.hpp>  // the host layer's cost
#include <ctpipe/model/context.hpp>   // counter_random

namespace ctpipe::layers::device {

namespace detail {
/// out = in dropped (drop) or copied, element i of the rows in use.
struct dropout_apply {
  const float* in;
  float* out;
  std::size_t cols, rows;
  const int* extent;
  const std::uint64_t* step;  // device memory: the step's number, read in the kernel
  int layer, microbatch;
  std::uint32_t stream;
  float rate, keep_scale;
  bool drop;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    if (i / cols >= rows_in_use(extent, rows)) return;
    out[i] = drop ? ctpipe::layers::detail::dropped(counter_random::of(layer, microbatch, *step, stream).at(i), rate,
                                                    keep_scale, in[i])
                  : in[i];
  }
};
}  // namespace detail

/// Dropout over Rows x Cols on a device, as ctpipe::layers::dropout: rate per_mille / 1000
/// (PerMille unless the run sets it), `stream` the random stream it draws from; in a forward-only
/// pass it copies.
template <device_ops Ops, std::size_t Rows, std::size_t Cols, unsigned PerMille, rows R = rows::fixed>
struct dropout {
  static_assert(PerMille < 1000, "ctpipe::layers::device::dropout: PerMille must be below 1000");
  using input_type = matrix<Rows, Cols, R>;
  using output_type = matrix<Rows, Cols, R>;
  static constexpr double cost = ctpipe::layers::dropout<Rows, Cols, PerMille, R>::cost;

  std::uint32_t stream = 0;
  unsigned per_mille = PerMille;

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    run(c, x.data, y.data, c.training);
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    run(c, dy.data, dx.data, true);
  }

 private:
  void run(const ctpipe::cuda::context& c, const float* in, float* out, bool training) const {
    if (per_mille >= 1000)
      throw std::invalid_argument("ctpipe::layers::device::dropout: per_mille is " + std::to_string(per_mille) +
                                  "; a rate is below 1000 thousandths");
    const float rate = static_cast<float>(per_mille), keep_scale = 1000.0f / static_cast<float>(1000u - per_mille);
    Ops::for_each(c, Rows * Cols,
                  detail::dropout_apply{in, out, Cols, Rows, extent_of<R>(c), c.step, c.layer, c.microbatch, stream,
                                        rate, keep_scale, training && per_mille != 0});
  }
};

}  // namespace ctpipe::layers::device
