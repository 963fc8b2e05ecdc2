// build error: a stage plan that starts past layer 0 \(a frozen prefix: freeze_partition\) runs on the executors of host layers only
// build error: executor_requirements<ctpipe::cuda::detail::executor_tag
#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/exec/detail/requirements.hpp>
// A device layer and loss that launch nothing: the CUDA executor's rules, without CUDA.
struct layer {
  using input_type = ctpipe::cuda::tensor<float, 4>;
  using output_type = ctpipe::cuda::tensor<float, 4>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const input_type&, output_type&) {}
  void backward(const ctpipe::cuda::context&, const input_type&, const output_type&, const output_type&, input_type&) {}
};
struct loss {
  using target_type = ctpipe::cuda::tensor<int, 4>;
  void operator()(const ctpipe::cuda::context&, const layer::output_type&, const target_type&, layer::output_type&,
                  double*) const {}
};
using net = ctpipe::model<layer, layer, layer, layer>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
constexpr auto plan = ctpipe::make_execution_plan<table>();
constexpr auto stages = ctpipe::freeze_partition<net, 2>(1);
static_assert(ctpipe::detail::executor_requirements<ctpipe::cuda::detail::executor_tag, table, net, stages, 2,
                                                    ctpipe::detail::backward_in_order(plan), loss>::value);
