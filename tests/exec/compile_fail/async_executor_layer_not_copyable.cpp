// build error: ctpipe executor: every layer must be copyable: this executor keeps copies of its layers, one per weight version
// build error: executor_requirements<ctpipe::detail::async_executor_tag
// build output under: 20480 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/layers/relu.hpp>
using ctpipe::layers::dense;
// A host layer that cannot be copied (it holds a unique resource).
struct unique_relu : ctpipe::layers::relu<2, 4> {
  unique_relu() = default;
  unique_relu(const unique_relu&) = delete;
  unique_relu& operator=(const unique_relu&) = delete;
};
using net = ctpipe::model<dense<2, 3, 4>, unique_relu, dense<2, 4, 4, ctpipe::layers::activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
using exec = ctpipe::async_executor<ctpipe::pipedream(3, 4), net, ctpipe::partition<net, 3>(), loss, ctpipe::sgd>;
constexpr int r = exec::ranks;
