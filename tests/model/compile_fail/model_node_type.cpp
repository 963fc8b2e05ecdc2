// build error: ctpipe::model: a node's input part must have the type of the output part it reads \(from<K, O> or back<N, O>\)
// build error: edge_check<2, 1, -1, 0,
// build output under: 8000 bytes
// A residual join that reads the model's input (4 x 16) where its second part is 4 x 32.
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/add.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::back, ctpipe::from, ctpipe::node;
using net = ctpipe::model<ctpipe::layers::dense<4, 16, 32>, ctpipe::layers::dense<4, 32, 32>,
                          node<ctpipe::layers::add<4, 32>, back<1>, from<-1>>>;
static_assert(net::size == 3);
