// build error: ctpipe::model: the layers of shared_with<K, L> must share parameters of one element type
// build output under: 8192 bytes
// A layer of doubles cannot share a float layer's weights.
#include <ctpipe/ctpipe.hpp>  // first: the compile-fail tests' precompiled header stands for it

#include <array>
#include <ctpipe/layers/dense.hpp>
#include <span>
using d = ctpipe::layers::dense<4, 8, 8>;
struct twice {
  using input_type = d::output_type;
  using output_type = d::output_type;
  static constexpr double cost = 1;
  std::array<double, 64> w{}, g{};
  std::span<double> parameters() { return w; }
  std::span<double> gradients() { return g; }
  void forward(const input_type& x, output_type& y) { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) { dx = dy; }
};
using net = ctpipe::model<d, ctpipe::shared_with<0, twice>>;
static_assert(!net::checked);
