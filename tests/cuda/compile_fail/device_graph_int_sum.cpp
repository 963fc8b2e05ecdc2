// build error: ctpipe::model: an output part read by several layers receives the sum of their gradients
// build output under: 16384 bytes
// A device model whose tensor of int elements is read by two layers: the device executors add its
// gradients with their runtime's axpy (float or double), so the model is refused, naming the rule.
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/model/graph.hpp>
#include <ctpipe/model/model.hpp>

using ints = ctpipe::cuda::tensor<int, 4>;
struct mask {  // ints in, ints out
  using input_type = ints;
  using output_type = ints;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const ints&, ints&);
  void backward(const ctpipe::cuda::context&, const ints&, const ints&, const ints&, ints&);
};
struct join {  // two int tensors in
  using input_type = ctpipe::tensors<ints, ints>;
  using output_type = ints;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, ints&);
  void backward(const ctpipe::cuda::context&, const input_type&, const ints&, const ints&, input_type&);
};
// Layer 0's output is read by layer 1 and by layer 2.
using net = ctpipe::model<mask, mask, ctpipe::node<join, ctpipe::back<1>, ctpipe::back<2>>>;
static_assert(net::size == 3);
