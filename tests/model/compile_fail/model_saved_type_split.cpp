// build error: ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, and it needs both, as void backward_input\(const input_type& x, const output_type& y, saved_type& s, const output_type& dy, input_type& dx\) and void backward_weight\(const input_type& x, const output_type& y, const saved_type& s, const output_type& dy\)
// build error: layer_check<0,
// build output under: 8000 bytes
// A layer with saved state whose W forgot it.
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
  void backward(const input_type&, const output_type&, const saved_type&, const output_type&, input_type&) {}
  void backward_input(const input_type&, const output_type&, saved_type&, const output_type&, input_type&) {}
  void backward_weight(const input_type&, const output_type&, const output_type&) {}
};
using net = ctpipe::model<keeps>;
net n;
