// build error: ctpipe::synthesise: memory_limit leaves synthesis no order: on V placement its heuristic needs 2 [*] ranks activations of a stage or more
#include <ctpipe/ctpipe.hpp>
// The heuristic's own order on V placement wants 2p = 8 activations of a stage a rank here.
constexpr auto t = ctpipe::make_table<ctpipe::synthesise_heuristic(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 7,
                                                                   ctpipe::synthesis_placement::v)>();
