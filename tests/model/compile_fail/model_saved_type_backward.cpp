// build error: ctpipe::model: this layer has a saved_type, so it needs backward\(const input_type& x, const output_type& y, const saved_type& s, const output_type& dy, input_type& dx\)
// build error: layer_check<1,
// build output under: 8000 bytes
// A backward that does not read the saved state (here: takes it by mutable reference).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct keeps {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  struct saved_type {
    float mean = 0;
  };
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&, saved_type&) {}
  void backward(const input_type&, const output_type&, saved_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<ctpipe::layers::dense<2, 3, 4>, keeps>;
net n;
