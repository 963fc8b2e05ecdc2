// build error: ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input\(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy, input_type& dx\) and void backward_weight\(const ctpipe::cuda::context&, const input_type& x, const output_type& y, const output_type& dy\)
// build error: layer_check<0,
// build output under: 8000 bytes
// A device layer whose backward_weight forgot the context: a near miss, not a layer that does not split.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
struct no_context {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_input(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&,
                      input_type&) {}
  void backward_weight(const input_type&, const output_type&, const output_type&) {}
};
using net = ctpipe::model<no_context>;
static_assert(net::size == 1);
