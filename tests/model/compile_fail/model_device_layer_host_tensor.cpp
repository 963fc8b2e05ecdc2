// build error: ctpipe::model: a device layer's input_type and output_type must be device tensors
// build output under: 8000 bytes
// build error: layer_check<0,
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/layers/dense.hpp>
// A device layer whose tensors are host matrices (no data pointer, no bytes).
struct host_tensors {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<host_tensors>;
static_assert(net::size == 1);
