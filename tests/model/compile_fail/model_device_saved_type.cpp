// build error: ctpipe::model: this device layer has a saved_type, so it needs forward\(const ctpipe::cuda::context&, const input_type& x, output_type& y, saved_type& s\) and backward\(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const saved_type& s, const output_type& dy, input_type& dx\)
// build error: layer_check<0,
// build output under: 8000 bytes
// A device layer that declares a saved_type but whose calls do not take it: a near miss, not a
// layer without saved state.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
struct keeps {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  using saved_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<keeps>;
static_assert(net::size == 1);
