// build error: ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build output under: 12288 bytes
// A misspelled backward_weight (backward_wieght), the model given to an executor, constructed and
// stepped: the model's rule is the one message (no second one saying the layer is no host layer,
// no errors from the executor's code). It was 3 errors and 72 KB with g++ 12, 20 and 364 KB with
// clang 14.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <vector>
using d = ctpipe::layers::dense<2, 4, 4>;
struct typo {
  using input_type = ctpipe::layers::matrix<2, 4>;
  using output_type = ctpipe::layers::matrix<2, 4>;
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_input(const input_type&, const output_type&, const output_type&, input_type&) {}
  void backward_wieght(const input_type&, const output_type&, const output_type&) {}
};
using net = ctpipe::model<d, typo, d, d>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
constexpr auto table = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
int main() {
  net m;
  loss l;
  ctpipe::host_executor<table, net, ctpipe::partition<net, 2>(), loss> exec(m, l);
  std::vector<net::input_type> x(4);
  std::vector<loss::target_type> t(4);
  exec.step(x, t);
}
