// interleaved at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run.
#include "support/numerics.hpp"

CTPIPE_NUMERICS_TESTS(interleaved, , 2)
