// build error: ctpipe::model: this device layer declares backward_input or backward_weight, so it splits its backward, and it needs both
// build output under: 12288 bytes
// A device layer's misspelled backward_weight, its model given to the CUDA executor (on the stream
// simulator), constructed and stepped: the model's rule is the one message, as on the host
// executors (exec/compile_fail/executor_split_near_miss.cpp). It was 12 errors and 343 KB with
// g++ 12: the engine's tasks read the stand-ins' tensors.
#include <ctpipe/cuda/executor.hpp>

#include "../../support/stream_sim.hpp"
#include "device_split_typo.hpp"

constexpr auto table = ctpipe::make_table<ctpipe::zb_h1(2, 4)>();
using executor = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), loss, 0,
                                              ctpipe::dispatch::automatic, sim::backend>;
void train(net& m, loss& l, const std::vector<net::input_type>& x, const std::vector<loss::target_type>& t) {
  executor exec(m, l);
  exec.step(x, t);
}
