// build error: ctpipe::model: this device layer needs both forward\(const ctpipe::cuda::context&, const input_type& x, output_type& y\) and backward
// build output under: 8000 bytes
// build error: layer_check<0,
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
struct forward_only {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
};
using net = ctpipe::model<forward_only>;
static_assert(net::size == 1);
