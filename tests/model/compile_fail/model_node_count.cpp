// build error: ctpipe::model: a node<L, sources...> names one source for each part of L's input_type \(one for a tensor, N for ctpipe::tensors of N types\)
// build error: node_sources_check<1, 1, 2>
// build output under: 8000 bytes
// A join of two tensors given one source.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using net = ctpipe::model<ctpipe::layers::dense<4, 32, 32>, node<ctpipe::layers::add<4, 32>, back<1>>>;
static_assert(net::size == 2);
