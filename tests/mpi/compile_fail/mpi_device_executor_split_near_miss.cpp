// build error: ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build output under: 12288 bytes
// A device layer's misspelled backward_weight, its model given to the MPI executor's device path
// (on the stream simulator), constructed and stepped: the model's rule is the one message.
#include <ctpipe/mpi/device_executor.hpp>

#include "../../cuda/compile_fail/device_split_typo.hpp"
#include "../../support/stream_sim.hpp"

constexpr auto table = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
using executor = ctpipe::mpi::basic_device_executor<table, net, ctpipe::partition<net, 2>(), loss, sim::backend>;
void train(net& m, loss& l, const std::vector<net::input_type>& x, const std::vector<loss::target_type>& t) {
  executor exec(m, l, 0);
  exec.step(x, t);
}
