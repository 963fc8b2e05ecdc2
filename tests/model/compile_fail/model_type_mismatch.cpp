// build error: ctpipe::model: the output_type of a layer must be the input_type of the next layer
// build output under: 8000 bytes
// build error: layer_chain_check<1,
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 5>, dense<2, 6, 2>>;
net n;
