// build error: ctpipe::model: this layer is not a layer: it needs backward\(const input_type& x, const output_type& y, const output_type& dy, input_type& dx\)
// build error: layer_check<1,
// build output under: 12288 bytes
// A backward whose dy is not const (a near miss of the signature), the model given to an executor,
// constructed and stepped: the model's rule is the one message. It was 3 errors with g++ 12 and
// 20 with clang 14, the second a false "every layer must be a host layer".
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <vector>
using d = ctpipe::layers::dense<2, 4, 4>;
struct mutable_dy {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, output_type&, input_type&) {}
};
using net = ctpipe::model<d, mutable_dy, d>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
int main() {
  net m;
  loss l;
  ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss> exec(m, l);
  std::vector<net::input_type> x(4);
  std::vector<loss::target_type> t(4);
  exec.step(x, t);
}
