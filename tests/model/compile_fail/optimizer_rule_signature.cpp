// build error: ctpipe::optimizer: Rule must have static constexpr std::array<std::string_view, N> state_names
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
// A near miss: one state name, but the call takes no state span.
struct my_rule {
  static constexpr std::array<std::string_view, 1> state_names{"velocity"};
  void operator()(const ctpipe::update_info&, std::span<float> w, std::span<const float> g) const {
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= g[i];
  }
};
using net = ctpipe::model<ctpipe::layers::dense<1, 2, 2>>;
void make(net& m) { ctpipe::optimizer opt(m, my_rule{}); }
