// build error: ctpipe::model: every token-major tensor of a model has the same max_tokens
// build output under: 6000 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
using ctpipe::layers::activation, ctpipe::layers::rows;
// Layer 1's output holds 8 tokens, its input 4: no one extent counts both.
struct widen {
  using input_type = ctpipe::layers::matrix<4, 8, rows::tokens>;
  using output_type = ctpipe::layers::matrix<8, 8, rows::tokens>;
  static constexpr double cost = 1.0;
  void forward(const input_type&, output_type&) {}
  void backward(const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<ctpipe::layers::dense<4, 8, 8, activation::relu, rows::tokens>, widen>;
static_assert(net::size == 2);
