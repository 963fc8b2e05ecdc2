// build error: ctpipe::partition: more stages than layers; each stage needs at least one layer
// build output under: 4096 bytes
// Four stages for three layers, used as a user would (construct, then step): partition's message
// and nothing after it (it was 383 errors and 12 MB).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <vector>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 2>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 2>;
constexpr auto table = ctpipe::make_table<ctpipe::interleaved(2, 2, 2)>();  // 4 stages
int main() {
  net m;
  loss l;
  ctpipe::host_executor<table, net, ctpipe::partition<net, 4>(), loss> exec(m, l);
  std::vector<net::input_type> x(2);
  std::vector<loss::target_type> t(2);
  exec.step(x, t);
}
