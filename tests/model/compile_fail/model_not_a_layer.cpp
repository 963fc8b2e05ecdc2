// build error: ctpipe::model: this layer is not a layer: it needs forward\(const input_type& x, output_type& y\)
// build output under: 8000 bytes
// build error: layer_check<1,
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct no_forward {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void backward(const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<ctpipe::layers::dense<2, 3, 4>, no_forward>;
net n;
