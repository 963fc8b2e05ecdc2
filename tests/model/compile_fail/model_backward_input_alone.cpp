// build error: ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build error: layer_check<0,
// build output under: 8000 bytes
// Half a split: backward_input without backward_weight.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct half_split {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_input(const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<half_split>;
net n;
