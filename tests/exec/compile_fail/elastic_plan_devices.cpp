// build error: ctpipe::elastic_plan: Ranks must be at least 1 and divide Devices
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using l = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<l, l, l, l, l, l>;
constexpr auto p = ctpipe::elastic_plan<net, 6, 4, 8, std::array{0, 2}>::points;
