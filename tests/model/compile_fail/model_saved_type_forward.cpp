// build error: ctpipe::model: this layer has a saved_type, so it needs forward\(const input_type& x, output_type& y, saved_type& s\)
// build error: layer_check<0,
// build output under: 8000 bytes
// A saved_type its forward never writes: a near miss, not a layer that keeps nothing.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct keeps {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  struct saved_type {
    float mean = 0;
  };
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, const saved_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<keeps>;
net n;
