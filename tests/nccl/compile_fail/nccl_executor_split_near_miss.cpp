// build error: ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build output under: 12288 bytes
// A device layer's misspelled backward_weight, its model given to the NCCL executor (on the stream
// simulator and the stand-in for NCCL), constructed and stepped: the model's rule is the one
// message.
#include <ctpipe/nccl/executor.hpp>

#include "../../cuda/compile_fail/device_split_typo.hpp"
#include "../../support/nccl_sim.hpp"

constexpr auto table = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
using executor =
    ctpipe::nccl::basic_executor<table, net, ctpipe::partition<net, 2>(), loss, sim::backend, sim::nccl::net>;
void train(net& m, loss& l, ctpipe::nccl::job<sim::nccl::net> j, const std::vector<net::input_type>& x,
           const std::vector<loss::target_type>& t) {
  executor exec(m, l, j);
  exec.step(x, t);
}
