// build error: ctpipe::synthesise: costs.activation must be at least 1, and costs.weight_stash from 0 to costs.activation
#include <ctpipe/ctpipe.hpp>
// A weight stash larger than the activations it is part of.
constexpr auto t =
    ctpipe::make_table<ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1).with_memory(3, 4), 12)>();
