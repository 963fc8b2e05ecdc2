// build error: ctpipe::cuda::device_optimizer: Rule must have an element form for the parameter type T of every layer
// build output under: 8000 bytes
// A rule with only the span form (the host optimizer's) cannot run on the device: one error names
// what it lacks, and what to use instead.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <ctpipe/cuda/optimizer.hpp>

#include "../../support/sim_mlp.hpp"
using net = test::device::mlp;
using exec =
    ctpipe::cuda::basic_executor<ctpipe::make_table<ctpipe::one_f_one_b(2, 2)>(), net, ctpipe::partition<net, 2>(),
                                 test::device::sim_loss, 0, ctpipe::dispatch::automatic, sim::backend>;
struct span_only {
  static constexpr std::array<std::string_view, 0> state_names{};
  template <class T>
  void operator()(const ctpipe::update_info&, std::span<T>, std::span<const T>) const {}
};
void make(exec& e) { ctpipe::cuda::device_optimizer opt(e, span_only{}); }
