// build error: ctpipe::model: every output part of a layer but the last must be read by a later layer \(the next layer, or a node's from<K, O> or back<N, O>\)
// build error: output_read_check<1, 0, false>
// build output under: 8000 bytes
// A node that skips past layer 1, whose output then goes nowhere.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::node;
using d = ctpipe::layers::dense<4, 32, 32>;
using net = ctpipe::model<d, d, node<d, back<2>>>;
static_assert(net::size == 3);
