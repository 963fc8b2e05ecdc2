// The quickstart's MLP as device layers: cuBLAS GEMMs and the small kernels of kernels.cu. Host
// code, included by main.cu (nvcc) and by the GPU tests and benchmark (g++ or clang); the kernels are behind plain
// launch functions.
#pragma once

#include <ctpipe/cuda.hpp>
#include <ctpipe/model/compute_copy.hpp>  // bf16 weights (dense<..., Bf16>)

#include <cublas_v2.h>  // cublasSgemm

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels.hpp"

namespace mlp_gpu {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
inline void blas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)));
}

/// One cuBLAS handle per stream an executor issues on (a rank's stream, and its second stream where
/// the table has overlapped pairs F&B), bound to that stream, each with a workspace of its own (so
/// that two streams never share one, and a capture into a graph allocates nothing).
class blas_handles {
 public:
  static blas_handles& get() {
    static blas_handles h;
    return h;
  }
  /// Binds a handle to `stream` on `device` (once per stream, before the executor's first step).
  void bind(cudaStream_t stream, int device) {
    auto it = std::find_if(slots_.begin(), slots_.end(), [&](const slot& s) { return s.stream == stream; });
    slot& s = it != slots_.end() ? *it : slots_.emplace_back();
    s.stream = stream;
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    if (s.handle && s.device != device) {  // a stream of another device took a freed stream's address
      cublasDestroy(s.handle);
      cudaFree(s.workspace);
      s.handle = nullptr;
    }
    if (!s.handle) {
      blas_check(cublasCreate(&s.handle), "cublasCreate");
      cuda_check(cudaMalloc(&s.workspace, workspace_bytes), "cudaMalloc (cuBLAS workspace)");
      s.device = device;
    }
    blas_check(cublasSetStream(s.handle, stream), "cublasSetStream");
    blas_check(cublasSetWorkspace(s.handle, s.workspace, workspace_bytes), "cublasSetWorkspace");
  }
  /// The handle bound to the stream of `c`.
  cublasHandle_t operator[](const ctpipe::cuda::context& c) const {
    const auto stream = reinterpret_cast<cudaStream_t>(c.stream);
    for (const slot& s : slots_)
      if (s.stream == stream && s.handle) return s.handle;
    throw std::logic_error("mlp_gpu: no cuBLAS handle bound to the stream of rank " + std::to_string(c.rank) +
                           " (call bind_blas)");
  }
  ~blas_handles() {
    for (slot& s : slots_) {
      if (s.handle) cublasDestroy(s.handle);
      if (s.workspace) cudaFree(s.workspace);
    }
  }

 private:
  static constexpr std::size_t workspace_bytes = 4u << 20;
  struct slot {
    cudaStream_t stream = nullptr;
    int device = 0;
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
  };
  std::vector<slot> slots_;
};

/// Binds a cuBLAS handle to each stream of `exec`.
template <class Executor>
void bind_blas(const Executor& exec) {
  for (int r = 0; r < Executor::ranks; ++r) {
    const int device = Executor::devices[static_cast<std::size_t>(r)];
    blas_handles::get().bind(exec.stream(r), device);
    if (exec.second_stream(r) != exec.stream(r)) blas_handles::get().bind(exec.second_stream(r), device);
  }
}

/// Device memory of n elements of T, zeroed, freed with the object; not copyable.
template <class T>
class device_buffer {
 public:
  explicit device_buffer(std::size_t n) : n_(n) {
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)), "cudaMalloc");
    cuda_check(cudaMemset(p_, 0, n * sizeof(T)), "cudaMemset");
  }
  ~device_buffer() { cudaFree(p_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    cuda_check(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
  }
  void upload(std::span<const T> h) {
    if (h.size() != n_) throw std::invalid_argument("device_buffer::upload: size mismatch");
    cuda_check(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};
using device_floats = device_buffer<float>;

// A dense layer's bf16 copy of its weights and the floats it widens them into (Bf16), or nothing.
template <bool Bf16, std::size_t N>
struct weights_copy {};
template <std::size_t N>
struct weights_copy<true, N> {
  device_buffer<ctpipe::bf16> copy{N};
  device_floats widened{N};
};

/// y = act(x W^T + b) for a microbatch of Batch samples; parameters W (Out x In) then b (Out), in
/// the layout of ctpipe::layers::dense, so that the host layer's parameters upload as they are.
/// Bf16: it computes with a bf16 copy of its weights (ctpipe/model/compute_copy.hpp), widened into
/// floats before each product (activations and gradients stay float); after setting its
/// parameters, refresh_copy() writes the copy (the optimizers rewrite it after each update).
template <std::size_t Batch, std::size_t In, std::size_t Out, bool Relu = true, bool Bf16 = false>
struct dense : weights_copy<Bf16, Out * In + Out> {
  using input_type = ctpipe::cuda::tensor<float, Batch, In>;
  using output_type = ctpipe::cuda::tensor<float, Batch, Out>;
  static constexpr double cost = 2.0 * static_cast<double>(Batch * In * Out);  // as the host layer
  // Named as the host layer's (a checkpoint of either loads into the other).
  static constexpr std::array parameter_tensors{ctpipe::parameter_tensor{"weight", {Out, In}},
                                                ctpipe::parameter_tensor{"bias", {Out}}};

  device_floats params{Out * In + Out}, grads{Out * In + Out}, dz{Batch * Out};

  std::span<float> parameters() { return {params.data(), params.size()}; }
  std::span<float> gradients() { return {grads.data(), grads.size()}; }
  std::span<ctpipe::bf16> compute_parameters() requires Bf16 { return {this->copy.data(), this->copy.size()}; }
  void refresh_copy() requires Bf16 {
    mlp_kernels::narrow(params.data(), this->copy.data(), static_cast<int>(params.size()), nullptr);
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    const float one = 1.0f, zero = 0.0f;
    const float* const w = weights(c);
    // Row-major y (Batch x Out) = x W^T, that is column-major y^T (Out x Batch) = W x^T.
    blas_check(cublasSgemm(blas_handles::get()[c], CUBLAS_OP_T, CUBLAS_OP_N, Out, Batch, In, &one, w, In, x.data, In,
                           &zero, y.data, Out),
               "cublasSgemm (forward)");
    mlp_kernels::bias_activation(y.data, w + Out * In, Batch, Out, Relu, c.stream);
  }

  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const output_type& dy,
                input_type& dx) {
    pre_activation_gradient(c, y, dy);
    add_weight_gradients(c, x);
    input_gradient(c, dx);
  }
  // Split backward (I, then W later): the same kernels as backward's, so that the bits agree.
  void backward_input(const ctpipe::cuda::context& c, const input_type&, const output_type& y, const output_type& dy,
                      input_type& dx) {
    pre_activation_gradient(c, y, dy);
    input_gradient(c, dx);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type& y,
                       const output_type& dy) {
    pre_activation_gradient(c, y, dy);
    add_weight_gradients(c, x);
  }

 private:
  // The weights the products read: the parameters, or their bf16 copy widened on the stream.
  const float* weights(const ctpipe::cuda::context& c) {
    if constexpr (Bf16) {
      mlp_kernels::widen(this->copy.data(), this->widened.data(), static_cast<int>(params.size()), c.stream);
      return this->widened.data();
    } else {
      static_cast<void>(c);
      return params.data();
    }
  }
  // dz = dy * act'(y), into the layer's scratch dz.
  void pre_activation_gradient(const ctpipe::cuda::context& c, const output_type& y, const output_type& dy) {
    mlp_kernels::activation_backward(dz.data(), dy.data, y.data, static_cast<int>(Batch * Out), Relu, c.stream);
  }
  // db += column sums of dz; dW (Out x In) += dz^T x: column-major dW^T (In x Out) += x^T dz.
  void add_weight_gradients(const ctpipe::cuda::context& c, const input_type& x) {
    const float one = 1.0f;
    mlp_kernels::bias_gradient(grads.data() + Out * In, dz.data(), Batch, Out, c.stream);
    blas_check(cublasSgemm(blas_handles::get()[c], CUBLAS_OP_N, CUBLAS_OP_T, In, Out, Batch, &one, x.data, In,
                           dz.data(), Out, &one, grads.data(), In),
               "cublasSgemm (weight gradient)");
  }
  // dx (Batch x In) = dz W: column-major dx^T (In x Batch) = W^T dz^T.
  void input_gradient(const ctpipe::cuda::context& c, input_type& dx) {
    const float one = 1.0f, zero = 0.0f;
    blas_check(cublasSgemm(blas_handles::get()[c], CUBLAS_OP_N, CUBLAS_OP_N, In, Batch, Out, &one, weights(c), In,
                           dz.data(), Out, &zero, dx.data, In),
               "cublasSgemm (input gradient)");
  }
};
static_assert(ctpipe::cuda::device_splittable_layer<dense<2, 3, 4>>);
static_assert(ctpipe::has_compute_copy<dense<2, 3, 4, true, true>> && !ctpipe::has_compute_copy<dense<2, 3, 4>>);

/// Layer norm over each sample's Width features, with scale and shift (parameters: gamma, then beta,
/// as ctpipe::layers::layer_norm). It keeps each row's mean and inverse deviation for its backward
/// (its saved_type: device memory the executor holds per microbatch in flight), so neither its
/// backward nor its split halves compute them again: I reads them for dx, W for the scale and shift
/// gradients.
template <std::size_t Batch, std::size_t Width>
struct layer_norm {
  using input_type = ctpipe::cuda::tensor<float, Batch, Width>;
  using output_type = ctpipe::cuda::tensor<float, Batch, Width>;
  using saved_type = ctpipe::cuda::tensor<float, 2, Batch>;  // each row's mean, then its 1 / sqrt(var + eps)
  static constexpr double cost = 8.0 * static_cast<double>(Batch * Width);  // as the host layer
  static constexpr std::array parameter_tensors{ctpipe::parameter_tensor{"weight", {Width}},
                                                ctpipe::parameter_tensor{"bias", {Width}}};

  device_floats params{2 * Width}, grads{2 * Width};
  layer_norm() {
    std::vector<float> start(2 * Width, 0.0f);
    std::fill_n(start.begin(), Width, 1.0f);  // gamma 1, beta 0
    params.upload(start);
  }

  std::span<float> parameters() { return {params.data(), params.size()}; }
  std::span<float> gradients() { return {grads.data(), grads.size()}; }

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y, saved_type& s) {
    mlp_kernels::layer_norm_forward(x.data, y.data, mean(s), inv_std(s), params.data(), Batch, Width, c.stream);
  }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type& y, const saved_type& s,
                const output_type& dy, input_type& dx) {
    backward_weight(c, x, y, s, dy);
    mlp_kernels::layer_norm_input_gradient(x.data, dy.data, mean(s), inv_std(s), params.data(), dx.data, Batch, Width,
                                           c.stream);
  }
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type&, saved_type& s,
                      const output_type& dy, input_type& dx) {
    mlp_kernels::layer_norm_input_gradient(x.data, dy.data, mean(s), inv_std(s), params.data(), dx.data, Batch, Width,
                                           c.stream);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const saved_type& s,
                       const output_type& dy) {
    mlp_kernels::layer_norm_weight_gradient(x.data, dy.data, mean(s), inv_std(s), grads.data(), Batch, Width, c.stream);
  }

 private:
  static float* mean(const saved_type& s) { return s.data; }
  static float* inv_std(const saved_type& s) { return s.data + Batch; }
};
static_assert(ctpipe::cuda::device_splittable_layer<layer_norm<2, 3>>);

/// Dropout of PerMille / 1000 of the elements, the others scaled by 1 / (1 - p): its mask is drawn in
/// the kernel from the task's random stream (the step read from device memory there), so it is the
/// mask ctpipe::layers::dropout draws on the host for the same (step, microbatch, layer), in any
/// schedule and in every replay of a graph; the backward draws it again instead of keeping it.
template <std::size_t Batch, std::size_t Width, unsigned PerMille>
struct dropout {
  using input_type = ctpipe::cuda::tensor<float, Batch, Width>;
  using output_type = ctpipe::cuda::tensor<float, Batch, Width>;
  static constexpr double cost = 1.0 * static_cast<double>(Batch * Width);
  static constexpr float keep_scale = 1000.0f / static_cast<float>(1000u - PerMille);

  std::uint32_t stream = 0;  // which of the task's random streams (as the host layer's)

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const { apply(c, x.data, y.data); }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    apply(c, dy.data, dx.data);
  }

 private:
  void apply(const ctpipe::cuda::context& c, const float* in, float* out) const {
    mlp_kernels::dropout(in, out, static_cast<int>(Batch * Width), PerMille, keep_scale, c.layer, c.microbatch, c.step,
                         stream, c.stream);
  }
};

/// y = a + b (a residual join: ctpipe::layers::add on the GPU; with ctpipe::node it closes a
/// residual around other layers). Its backward hands dy to both inputs; where one of them is read
/// by other layers too, the executor adds the gradients.
template <std::size_t Batch, std::size_t Width>
struct residual_add {
  using part = ctpipe::cuda::tensor<float, Batch, Width>;
  using input_type = ctpipe::tensors<part, part>;
  using output_type = part;
  static constexpr double cost = 1.0 * static_cast<double>(Batch * Width);

  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) const {
    mlp_kernels::add(std::get<0>(x).data, std::get<1>(x).data, y.data, static_cast<int>(part::size), c.stream);
  }
  void backward(const ctpipe::cuda::context& c, const input_type&, const output_type&, const output_type& dy,
                input_type& dx) const {
    cuda_check(cudaMemcpyAsync(std::get<0>(dx).data, dy.data, part::bytes, cudaMemcpyDeviceToDevice, c.stream),
               "cudaMemcpyAsync (residual_add backward)");
    cuda_check(cudaMemcpyAsync(std::get<1>(dx).data, dy.data, part::bytes, cudaMemcpyDeviceToDevice, c.stream),
               "cudaMemcpyAsync (residual_add backward)");
  }
};

/// Mean softmax cross-entropy over a microbatch.
template <std::size_t Batch, std::size_t Classes>
struct softmax_cross_entropy {
  using target_type = ctpipe::cuda::tensor<int, Batch>;
  using logits = ctpipe::cuda::tensor<float, Batch, Classes>;
  void operator()(const ctpipe::cuda::context& c, const logits& y, const target_type& t, logits& dy,
                  double* loss) const {
    mlp_kernels::softmax_cross_entropy(y.data, t.data, dy.data, loss, Batch, Classes, c.stream);
  }
};

/// SGD on every layer's parameters, on `stream`.
template <ctpipe::model_type M>
void sgd_step(M& m, float rate, cudaStream_t stream) {
  ctpipe::for_each_parameter(m, [&](std::span<float> w, std::span<float> g) {
    mlp_kernels::sgd(w.data(), g.data(), rate, static_cast<int>(w.size()), stream);
  });
}

/// Every parameter (Gradients: every gradient) of the model, in layer order, on the host.
template <bool Gradients, ctpipe::model_type M>
std::vector<float> download(M& m) {
  std::vector<float> all;
  ctpipe::for_each_layer(m, [&](auto& l) {
    if constexpr (requires { l.params.download(); }) {
      const std::vector<float> v = Gradients ? l.grads.download() : l.params.download();
      all.insert(all.end(), v.begin(), v.end());
    }
  });
  return all;
}
template <ctpipe::model_type M>
std::vector<float> parameters(M& m) {
  return download<false>(m);
}
template <ctpipe::model_type M>
std::vector<float> gradients(M& m) {
  return download<true>(m);
}

}  // namespace mlp_gpu
