// build error: ctpipe::synthesise: memory_limit must be at least one microbatch's activations
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 0)>();
