// build error: ctpipe::model: this layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build output under: 12288 bytes
// A misspelled backward_weight (backward_wieght) in a model given to the MPI executor: the model's
// rule is the one message, as on the host executor (exec/compile_fail/executor_split_near_miss.cpp).
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>

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
  ctpipe::mpi::executor<table, net, ctpipe::partition<net, 2>(), loss> exec(m, l, MPI_COMM_WORLD);
  std::vector<net::input_type> x(4);
  std::vector<loss::target_type> t(4);
  exec.step(x, t);
}
