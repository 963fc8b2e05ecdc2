// build error: ctpipe::model: an output part read by several layers receives the sum of their gradients, so its type needs T& operator\+=\(const T&\)
// build error: gradient_sum_check<0, 0,
// build output under: 8000 bytes
// Layer 0's output, a type without +=, read by layers 1 and 2.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/model/tensors.hpp>
struct plain {
  float v[4];
};
struct first {
  using input_type = plain;
  using output_type = plain;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const { dx = dy; }
};
struct join {
  using input_type = ctpipe::tensors<plain, plain>;
  using output_type = plain;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) const { y = std::get<0>(x); }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) const {
    dx = input_type{dy, dy};
  }
};
using net = ctpipe::model<first, first, ctpipe::node<join, ctpipe::back<1>, ctpipe::back<2>>>;
static_assert(net::size == 3);
