// build error: ctpipe::sgd_step: the model has device layers, whose parameters are in device memory
#include "../../support/sim_mlp.hpp"
void update(test::device::mlp& m) { ctpipe::sgd_step(m, 0.1); }
