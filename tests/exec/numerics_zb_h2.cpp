// zb_h2 at p = 1..4 trains the MLP with gradients equal to the bit to the sequential run (split
// backward: the dense layers run I and W where the table says).
#include "support/numerics.hpp"

CTPIPE_NUMERICS_TESTS(zb_h2)
