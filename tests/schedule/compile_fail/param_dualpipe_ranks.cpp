// build error: ctpipe::dualpipe: ranks must be even \(each rank holds a stage of both directions\)
#include <ctpipe/ctpipe.hpp>
constexpr auto t = ctpipe::make_table<ctpipe::dualpipe(3, 12)>();
