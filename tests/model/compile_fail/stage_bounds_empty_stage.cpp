// build error: ctpipe::stage_bounds: boundaries must increase strictly \(every stage needs at least one layer\)
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4>, dense<2, 4, 5>>;
constexpr auto p = ctpipe::stage_bounds<net, 0, 2, 2, 3>();
