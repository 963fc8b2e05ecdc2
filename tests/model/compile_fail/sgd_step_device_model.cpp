// build error: ctpipe::sgd_step: the model has device layers, whose parameters are in device memory
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
void update(test::device::mlp& m) { ctpipe::sgd_step(m, 0.1); }
