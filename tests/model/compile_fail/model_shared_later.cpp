// build error: ctpipe::model: shared_with<K, L> shares the parameters of an earlier layer: 0 <= K < L's index
// build output under: 8192 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using d = ctpipe::layers::dense<4, 8, 8>;
using net = ctpipe::model<d, ctpipe::shared_with<2, d>, d>;
static_assert(!net::checked);
