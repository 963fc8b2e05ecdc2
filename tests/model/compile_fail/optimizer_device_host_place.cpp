// build error: ctpipe::optimizer: the model has device layers, and this place cannot copy them to the host and back
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
// A place that divides the layers among processes but copies nothing (a host executor's kind).
struct host_place {
  bool updates_layer(std::size_t) const { return true; }
  bool counts_layer(std::size_t) const { return true; }
  bool leads() const { return true; }
  void sum_norm_terms(std::span<double>) const {}
};
void make(test::device::mlp& m, const host_place& p) { ctpipe::optimizer opt(m, p, ctpipe::sgd{}); }
