// build error: ctpipe::naive: chunks must be 1 \(only interleaved has chunks\)
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::schedule{ctpipe::schedule_kind::naive, 2, 2, 3, 0}>();
