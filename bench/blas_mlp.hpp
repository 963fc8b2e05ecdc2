// The MLP of the PyTorch comparison (bench/pytorch_pipe.sh): ctpipe's reference dense layer with
// its loops replaced by cblas_sgemm, so that ctpipe and PyTorch multiply through the same libblas.
// Parameters are laid out as torch.nn.Linear's: W (Out x In, row-major), then b (Out).
#pragma once
#include <ctpipe/ctpipe.hpp>
#include <ctpipe/layers/dense.hpp>

#include <cblas.h>

#include <cstddef>

namespace bench {

template <std::size_t Batch, std::size_t In, std::size_t Out,
          ctpipe::layers::activation Act = ctpipe::layers::activation::relu>
struct blas_dense : ctpipe::layers::dense<Batch, In, Out, Act> {
  using base = ctpipe::layers::dense<Batch, In, Out, Act>;
  using typename base::input_type;
  using typename base::output_type;
  static constexpr bool relu = Act == ctpipe::layers::activation::relu;
  static constexpr int b = static_cast<int>(Batch), in = static_cast<int>(In), out = static_cast<int>(Out);

  void forward(const input_type& x, output_type& y) const {
    const float* w = this->params.data();
    const float* bias = w + Out * In;
    for (std::size_t r = 0; r < Batch; ++r)
      for (std::size_t o = 0; o < Out; ++o) y.v[r * Out + o] = bias[o];
    // y = x W^T + b
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1.0f, x.v.data(), in, w, in, 1.0f, y.v.data(),
                out);
    if constexpr (relu)
      for (float& v : y.v) v = v < 0.0f ? 0.0f : v;
  }

  void backward(const input_type& x, const output_type& y, const output_type& dy, input_type& dx) {
    output_type dz;
    for (std::size_t i = 0; i < Batch * Out; ++i) dz.v[i] = (relu && y.v[i] <= 0.0f) ? 0.0f : dy.v[i];
    float* dw = this->grads.data();
    float* db = dw + Out * In;
    for (std::size_t r = 0; r < Batch; ++r)
      for (std::size_t o = 0; o < Out; ++o) db[o] += dz.v[r * Out + o];
    // dW += dz^T x ; dx = dz W
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, dz.v.data(), out, x.v.data(), in, 1.0f, dw,
                in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, dz.v.data(), out, this->params.data(), in,
                0.0f, dx.v.data(), in);
  }
};

}  // namespace bench
