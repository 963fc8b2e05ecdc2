// The example's small kernels; the GEMMs are cuBLAS's.
#include "kernels.hpp"

#include <ctpipe/model/compute_copy.hpp>  // bf16, to_compute: the optimizers' rounding
#include <ctpipe/model/context.hpp>       // counter_random: the same numbers in a kernel as on the host

#include <cmath>

namespace mlp_kernels {
namespace {

__global__ void bias_activation_kernel(float* y, const float* b, int rows, int cols, bool relu) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float z = y[i] + b[i % cols];
  y[i] = relu && z < 0.0f ? 0.0f : z;
}

__global__ void activation_backward_kernel(float* dz, const float* dy, const float* y, int n, bool relu) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dz[i] = relu && y[i] <= 0.0f ? 0.0f : dy[i];
}

__global__ void bias_gradient_kernel(float* db, const float* dz, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += dz[r * cols + c];
  db[c] += s;
}

__global__ void softmax_cross_entropy_kernel(const float* logits, const int* target, float* dlogits, double* loss,
                                             int rows, int classes) {
  extern __shared__ double row_loss[];
  const int r = threadIdx.x;
  if (r < rows) {
    const float* z = logits + r * classes;
    float mx = z[0];
    for (int c = 1; c < classes; ++c) mx = z[c] > mx ? z[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += expf(z[c] - mx);
    const int t = target[r];
    row_loss[r] = static_cast<double>(logf(sum) - (z[t] - mx));
    for (int c = 0; c < classes; ++c)
      dlogits[r * classes + c] = (expf(z[c] - mx) / sum - (c == t ? 1.0f : 0.0f)) / static_cast<float>(rows);
  }
  __syncthreads();
  if (r == 0) {
    double s = 0.0;
    for (int i = 0; i < rows; ++i) s += row_loss[i];
    *loss = s / rows;
  }
}

__global__ void layer_norm_forward_kernel(const float* x, float* y, float* mean, float* inv_std, const float* params,
                                          int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += xr[c];
  const float m = sum / static_cast<float>(cols);
  float var = 0.0f;
  for (int c = 0; c < cols; ++c) var += (xr[c] - m) * (xr[c] - m);
  const float is = 1.0f / sqrtf(var / static_cast<float>(cols) + 1e-5f);
  mean[r] = m;
  inv_std[r] = is;
  for (int c = 0; c < cols; ++c) y[r * cols + c] = (xr[c] - m) * is * params[c] + params[cols + c];
}

__global__ void layer_norm_input_gradient_kernel(const float* x, const float* dy, const float* mean,
                                                 const float* inv_std, const float* params, float* dx, int rows,
                                                 int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float sum = 0.0f, dot = 0.0f;
  for (int c = 0; c < cols; ++c) {
    const float g = dy[r * cols + c] * params[c];
    sum += g;
    dot += g * (x[r * cols + c] - mean[r]) * inv_std[r];
  }
  const float n = static_cast<float>(cols);
  for (int c = 0; c < cols; ++c) {
    const float xhat = (x[r * cols + c] - mean[r]) * inv_std[r];
    dx[r * cols + c] = inv_std[r] * (dy[r * cols + c] * params[c] - sum / n - xhat * dot / n);
  }
}

__global__ void layer_norm_weight_gradient_kernel(const float* x, const float* dy, const float* mean,
                                                  const float* inv_std, float* grads, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float dg = 0.0f, db = 0.0f;
  for (int r = 0; r < rows; ++r) {
    dg += dy[r * cols + c] * (x[r * cols + c] - mean[r]) * inv_std[r];
    db += dy[r * cols + c];
  }
  grads[c] += dg;
  grads[cols + c] += db;
}

__global__ void dropout_kernel(const float* in, float* out, int n, unsigned per_mille, float keep_scale, int layer,
                               int microbatch, const std::uint64_t* step, std::uint32_t stream) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const ctpipe::counter_random random = ctpipe::counter_random::of(layer, microbatch, *step, stream);
  const float u = ctpipe::counter_random::to_uniform(random.at(static_cast<std::uint64_t>(i)));
  out[i] = u * 1000.0f < static_cast<float>(per_mille) ? 0.0f : in[i] * keep_scale;
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

constexpr int threads = 256;
int blocks(int n) { return (n + threads - 1) / threads; }

}  // namespace

void bias_activation(float* y, const float* b, int rows, int cols, bool relu, cudaStream_t s) {
  bias_activation_kernel<<<blocks(rows * cols), threads, 0, s>>>(y, b, rows, cols, relu);
}
void activation_backward(float* dz, const float* dy, const float* y, int n, bool relu, cudaStream_t s) {
  activation_backward_kernel<<<blocks(n), threads, 0, s>>>(dz, dy, y, n, relu);
}
void bias_gradient(float* db, const float* dz, int rows, int cols, cudaStream_t s) {
  bias_gradient_kernel<<<blocks(cols), threads, 0, s>>>(db, dz, rows, cols);
}
void softmax_cross_entropy(const float* logits, const int* target, float* dlogits, double* loss, int rows, int classes,
                           cudaStream_t s) {
  softmax_cross_entropy_kernel<<<1, rows, sizeof(double) * static_cast<size_t>(rows), s>>>(logits, target, dlogits,
                                                                                           loss, rows, classes);
}
void layer_norm_forward(const float* x, float* y, float* mean, float* inv_std, const float* params, int rows, int cols,
                        cudaStream_t s) {
  layer_norm_forward_kernel<<<blocks(rows), threads, 0, s>>>(x, y, mean, inv_std, params, rows, cols);
}
void layer_norm_input_gradient(const float* x, const float* dy, const float* mean, const float* inv_std,
                               const float* params, float* dx, int rows, int cols, cudaStream_t s) {
  layer_norm_input_gradient_kernel<<<blocks(rows), threads, 0, s>>>(x, dy, mean, inv_std, params, dx, rows, cols);
}
void layer_norm_weight_gradient(const float* x, const float* dy, const float* mean, const float* inv_std, float* grads,
                                int rows, int cols, cudaStream_t s) {
  layer_norm_weight_gradient_kernel<<<blocks(cols), threads, 0, s>>>(x, dy, mean, inv_std, grads, rows, cols);
}
void dropout(const float* in, float* out, int n, unsigned per_mille, float keep_scale, int layer, int microbatch,
             const std::uint64_t* step, std::uint32_t stream, cudaStream_t s) {
  dropout_kernel<<<blocks(n), threads, 0, s>>>(in, out, n, per_mille, keep_scale, layer, microbatch, step, stream);
}
void spin(long long cycles, cudaStream_t s) { spin_kernel<<<1, 1, 0, s>>>(cycles); }

}  // namespace mlp_kernels

namespace mlp_kernels {
namespace {
__global__ void sgd_kernel(float* w, const float* g, float rate, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] -= rate * g[i];
}
__global__ void add_kernel(const float* a, const float* b, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}
__global__ void widen_kernel(const ctpipe::bf16* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(in[i]);
}
__global__ void narrow_kernel(const float* in, ctpipe::bf16* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ctpipe::to_compute<ctpipe::bf16>(in[i]);
}
}  // namespace
void widen(const ctpipe::bf16* in, float* out, int n, cudaStream_t s) {
  widen_kernel<<<blocks(n), threads, 0, s>>>(in, out, n);
}
void narrow(const float* in, ctpipe::bf16* out, int n, cudaStream_t s) {
  narrow_kernel<<<blocks(n), threads, 0, s>>>(in, out, n);
}
void add(const float* a, const float* b, float* y, int n, cudaStream_t s) {
  add_kernel<<<blocks(n), threads, 0, s>>>(a, b, y, n);
}
void sgd(float* w, const float* g, float rate, int n, cudaStream_t s) {
  sgd_kernel<<<blocks(n), threads, 0, s>>>(w, g, rate, n);
}
}  // namespace mlp_kernels
