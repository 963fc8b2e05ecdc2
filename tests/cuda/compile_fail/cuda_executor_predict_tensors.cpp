// build error: ctpipe: predict\(\) needs the model's output_type to be one device tensor
// build output under: 16384 bytes
// predict() copies the model's output into one device view per microbatch: a model that ends in
// two tensors (ctpipe::tensors) can be trained and evaluated, but not predicted.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "two_tensor_layers.hpp"
struct two_loss {  // a loss of the two tensors
  using target_type = ctpipe::cuda::tensor<int, test::batch>;
  void operator()(const ctpipe::cuda::context&, const two&, const target_type&, two&, double*);
};
using net = ctpipe::model<fork2, join2, fork2>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using exec = ctpipe::cuda::basic_executor<table, net, ctpipe::partition<net, 2>(), two_loss, 0,
                                          ctpipe::dispatch::automatic, sim::backend>;
void run(exec& e, std::span<const net::input_type> in, std::span<const two> out) { e.predict(in, out); }
