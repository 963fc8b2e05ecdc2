// build error: ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input\(const input_type& x, const output_type& y, const output_type& dy, input_type& dx\) and void backward_weight\(const input_type& x, const output_type& y, const output_type& dy\)
// build error: layer_check<1,
// build output under: 8000 bytes
// A near miss: backward_weight takes dy by mutable reference, so the layer does not split. Without
// the rule it would run its whole backward at I and nothing at W, silently.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct near_miss {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_input(const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_weight(const input_type&, const output_type&, output_type&) {}
};
using net = ctpipe::model<ctpipe::layers::dense<2, 3, 4>, near_miss>;
net n;
