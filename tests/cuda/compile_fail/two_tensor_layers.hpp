// Device layers that pass two tensors (ctpipe::tensors), for the device executors' compile-fail
// tests: fork2 takes one tensor and gives two, join2 takes two and gives one. Declared only: the
// tests never link. (Plain structs, not one template: their names stay short in the messages.)
#pragma once
#include "../../support/sim_mlp.hpp"

using t = ctpipe::cuda::tensor<float, test::batch, test::classes>;
using two = ctpipe::tensors<t, t>;
struct fork2 {
  using input_type = t;
  using output_type = two;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const t&, two&);
  void backward(const ctpipe::cuda::context&, const t&, const two&, const two&, t&);
};
struct join2 {
  using input_type = two;
  using output_type = t;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context&, const two&, t&);
  void backward(const ctpipe::cuda::context&, const two&, const t&, const t&, two&);
};
