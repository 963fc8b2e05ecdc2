// build error: ctpipe: a layer's parameter_tensors need names that are distinct, not empty
// build output under: 16384 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>
struct twice : ctpipe::layers::dense<1, 2, 2> {
  static constexpr std::array parameter_tensors{ctpipe::parameter_tensor{"weight", {2, 2}},
                                                ctpipe::parameter_tensor{"weight", {2}}};
};
using net = ctpipe::model<twice>;
static_assert(net::size == 1);
