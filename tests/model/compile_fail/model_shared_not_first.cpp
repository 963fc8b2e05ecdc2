// build error: ctpipe::model: shared_with<K, L> names its group's first layer: layer K must not be a shared_with itself
// build output under: 8192 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using d = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<d, ctpipe::shared_with<0, d>, ctpipe::shared_with<1, d>>;
static_assert(!net::checked);
