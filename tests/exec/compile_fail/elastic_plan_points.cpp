// build error: ctpipe::elastic_plan: the freeze points must increase strictly
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using l = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<l, l, l, l, l, l>;
constexpr auto p = ctpipe::elastic_plan<net, 4, 2, 8, std::array{0, 3, 2}>::points;
