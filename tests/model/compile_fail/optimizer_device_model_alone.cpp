// build error: ctpipe::optimizer: the model has device layers, whose parameters are in device memory: give its executor too
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include "../../support/sim_mlp.hpp"
// A model of device layers with no executor to copy its parameters to the host and back.
void make(test::device::mlp& m) { ctpipe::optimizer opt(m, ctpipe::sgd{}); }
