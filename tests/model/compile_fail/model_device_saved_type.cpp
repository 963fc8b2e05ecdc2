// build error: ctpipe::model: a device layer cannot have a saved_type yet: the device executors \(CUDA, NCCL, the MPI device path\) do not stash saved state
// build error: layer_check<0,
// build output under: 12000 bytes
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/tensor.hpp>
struct keeps {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  using saved_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&, input_type&) {}
};
using net = ctpipe::model<keeps>;
static_assert(net::size == 1);
