// build error: ctpipe::model: a device layer's saved_type must be a device tensor \(value_type, a constant bytes, a data pointer; ctpipe::cuda::tensor<T, extents...>\)
// build error: layer_check<0,
// build output under: 8000 bytes
// A device layer whose saved state is a host struct: the executors keep saved state in device memory.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
struct host_statistics {
  float mean[4];
};
struct keeps {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  using saved_type = host_statistics;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&, saved_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const saved_type&,
                const output_type&, input_type&) {}
};
using net = ctpipe::model<keeps>;
static_assert(net::size == 1);
