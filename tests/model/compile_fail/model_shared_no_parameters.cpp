// build error: ctpipe::model: both layers of shared_with<K, L> need what they share: parameters\(\) and gradients\(\)
// build output under: 8192 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/relu.hpp>
using d = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<d, ctpipe::shared_with<0, ctpipe::layers::relu<4, 8>>, d>;
static_assert(!net::checked);
