// build error: ctpipe executor: every stage of the stage plan must hold at least one layer
// build output under: 16384 bytes
// A hand-written plan with an empty stage (layers [0, 2), [2, 2), [2, 3)): the rule's message only.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <vector>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 2>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 2>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(3, 3)>();
constexpr ctpipe::stage_plan<3> plan{{0, 2, 2, 3}};
int main() {
  net m;
  loss l;
  ctpipe::host_executor<table, net, plan, loss> exec(m, l);
  std::vector<net::input_type> x(3);
  std::vector<loss::target_type> t(3);
  exec.step(x, t);
}
