// build error: ctpipe::model: a node reads an earlier layer or the model's input: from<K, O> with -1 <= K < the node's index, back<N, O> with 1 <= N <= the node's index \+ 1
// build error: node_order_check<1, 1, 2>
// build output under: 8000 bytes
// A node that reads a layer after it.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::from, ctpipe::node;
using net = ctpipe::model<ctpipe::layers::dense<4, 32, 32>, node<ctpipe::layers::add<4, 32>, back<1>, from<2>>,
                          ctpipe::layers::dense<4, 32, 32>>;
static_assert(net::size == 3);
