// one_f_one_b at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run.
#include "numerics.hpp"

CTPIPE_NUMERICS_TESTS(one_f_one_b)
