// build error: ctpipe: Optimizer must be callable as opt\(std::size_t layer, std::span<T> parameters, std::span<const T> gradients\) for the parameter type T of every layer with parameters
// build error: (required from [^ ]*class [^ ]*|in instantiation of template class [^ ]*)ctpipe::async_executor<
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::dense;
using net = ctpipe::model<dense<2, 3, 4>, dense<2, 4, 4, ctpipe::layers::activation::none>>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
struct double_only {  // updates double parameters only: dense's are float
  void operator()(std::size_t, std::span<double>, std::span<const double>) const {}
};
using exec = ctpipe::async_executor<ctpipe::pipedream(2, 4), net, ctpipe::partition<net, 2>(), loss, double_only>;
constexpr int r = exec::ranks;
