// build error: ctpipe::synthesise: memory_limit must be at least two microbatches' activations of a stage [(]2 [*] costs.activation[)] on V placement
#include <ctpipe/ctpipe.hpp>
// On V placement the last rank holds stages p-1 and p of a microbatch at once: a limit of one cannot run.
constexpr auto t = ctpipe::make_table<ctpipe::synthesise(4, 8, ctpipe::synthesis_costs::uniform(1, 1, 1), 1,
                                                         ctpipe::synthesis_placement::v)>();
