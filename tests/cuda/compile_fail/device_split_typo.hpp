// A device model with a split-backward near miss (backward_wieght for backward_weight), for the
// device executors' compile-fail tests: the model's rule must be the build's one message once the
// model is given to an executor, constructed and stepped. Declared only: the tests never link.
#pragma once
#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/model/model.hpp>

#include <vector>

using t4 = ctpipe::cuda::tensor<float, 2, 4>;
struct plain {
  using input_type = t4;
  using output_type = t4;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const t4&, t4&);
  void backward(const ctpipe::cuda::context&, const t4&, const t4&, const t4&, t4&);
};
struct typo : plain {
  void backward_input(const ctpipe::cuda::context&, const t4&, const t4&, const t4&, t4&);
  void backward_wieght(const ctpipe::cuda::context&, const t4&, const t4&, const t4&);
};
struct loss {
  using target_type = ctpipe::cuda::tensor<int, 2>;
  void operator()(const ctpipe::cuda::context&, const t4&, const target_type&, t4&, double*) const;
};
using net = ctpipe::model<plain, typo, plain, plain>;
