// build error: ctpipe::elastic_plan: the model is not a chain \(a node reads other than the previous layer's whole output\); elastic training freezes prefixes of chains only so far
// build output under: 16384 bytes
// A residual model in an elastic plan (the host, asynchronous and MPI executors run it).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<ctpipe::layers::add<4, 32>, back<1>, back<2>>, d>;
using plan = ctpipe::elastic_plan<net, 2, 2, 4, std::array{0, 1}>;
constexpr auto n = plan::count;
