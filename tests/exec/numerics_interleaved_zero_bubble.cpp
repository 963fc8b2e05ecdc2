// PyTorch's interleaved zero bubble (ZB1P, two chunks a rank) at p = 1..4 trains the MLP with
// gradients equal to the bit to the sequential run.
#include "support/numerics.hpp"

CTPIPE_NUMERICS_TESTS(interleaved_zero_bubble, , 2)
