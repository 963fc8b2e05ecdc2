// build error: ctpipe::model: the layers of shared_with<K, L> must share as many elements
// build output under: 8192 bytes
// Layer 2 shares layer 0's weights, but its own hold 8 x 16 = 128 elements and layer 0's 8 x 8 = 64:
// known from the layers' types, refused at compile time (the compiler's note shows
// shared_element_counts<2, 0, 128, 64>).
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<4, 8, 8>, dense<4, 8, 16>, ctpipe::shared_with<0, dense<4, 16, 8>>>;
static_assert(!net::checked);
