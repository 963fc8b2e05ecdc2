// build error: ctpipe executor: the stage plan must have as many stages as the table's pipeline \(ranks x chunks
// build error: stage_counts<3, 2>
// build output under: 12288 bytes
// A 3-stage plan on a 2-stage table, used as a user would (construct, then step): the rule's
// message, with both counts, and nothing after it (it was 84 KB of out-of-bounds errors).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <vector>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 2>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 2>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>();  // 2 stages
int main() {
  net m;
  loss l;
  ctpipe::host_executor<table, net, ctpipe::partition<net, 3>(), loss> exec(m, l);
  std::vector<net::input_type> x(2);
  std::vector<loss::target_type> t(2);
  exec.step(x, t);
}
