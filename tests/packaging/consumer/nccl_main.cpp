// A user's NCCL program: builds against ctpipe::nccl from a .cpp file (run it with one process and
// one GPU per rank; here it is only built and linked). Its layer copies its input: ordinary CUDA
// runtime calls on the stream the executor gives it.
#include <ctpipe/nccl.hpp>
#include <ctpipe/nccl/bootstrap.hpp>

#include <cstdlib>
#include <string>
#include <vector>

struct copy_layer {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    (void)cudaMemcpyAsync(y.data, x.data, input_type::bytes, cudaMemcpyDeviceToDevice, c.stream);
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) {
    (void)cudaMemcpyAsync(dx.data, dy.data, input_type::bytes, cudaMemcpyDeviceToDevice, c.stream);
  }
};
struct no_loss {
  using target_type = ctpipe::cuda::tensor<int, 1>;
  void operator()(const ctpipe::cuda::context&, const copy_layer::output_type&, const target_type&,
                  copy_layer::output_type&, double*) const {}
};
using net = ctpipe::model<copy_layer, copy_layer>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using executor = ctpipe::nccl::executor<table, net, ctpipe::partition<net, 2>(), no_loss>;

// Usage: nccl_main <process> <id file>; two processes, one GPU each.
int main(int argc, char** argv) {
  if (argc < 3) return 0;
  const int process = std::atoi(argv[1]);
  const ctpipe::nccl::world w(ctpipe::nccl::unique_id_through_file(argv[2], process), process, 2, process);
  net model;
  no_loss l;
  executor exec(model, l, w.get());
  const std::vector<net::input_type> inputs(4);
  const std::vector<no_loss::target_type> targets(4);
  exec.step(inputs, targets);
  return 0;
}
