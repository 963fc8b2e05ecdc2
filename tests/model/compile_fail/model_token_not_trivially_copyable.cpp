// build error: ctpipe::model: a token-major host tensor must be trivially copyable
// build output under: 6000 bytes
#include <ctpipe/ctpipe.hpp>
#include <vector>
// Tokens in a std::vector: the executors cannot copy a prefix of its bytes.
struct rows_in_heap {
  static constexpr std::size_t max_tokens = 4;
  std::vector<float> v = std::vector<float>(16);
};
struct layer {
  using input_type = rows_in_heap;
  using output_type = rows_in_heap;
  static constexpr double cost = 1.0;
  void forward(const input_type& x, output_type& y) { y = x; }
  void backward(const input_type&, const output_type&, const output_type& dy, input_type& dx) { dx = dy; }
};
using net = ctpipe::model<layer, layer>;
static_assert(net::size == 2);
