// Launchers of the example's kernels: plain functions on device pointers and a stream, compiled by
// nvcc in kernels.cu. Nothing of ctpipe's compile-time code crosses into device code.
#pragma once

#include <cuda_runtime_api.h>  // cudaStream_t

#include <ctpipe/model/bf16.hpp>  // the compute copy's element

#include <cstdint>

namespace mlp_kernels {

// y[r][c] = act(y[r][c] + b[c]) for a rows x cols row-major y.
void bias_activation(float* y, const float* b, int rows, int cols, bool relu, cudaStream_t s);
// dz = relu ? (y > 0 ? dy : 0) : dy.
void activation_backward(float* dz, const float* dy, const float* y, int n, bool relu, cudaStream_t s);
// db[c] += sum over r of dz[r][c], rows summed in order (deterministic).
void bias_gradient(float* db, const float* dz, int rows, int cols, cudaStream_t s);
// Mean softmax cross-entropy of `rows` samples: *loss, and dlogits = (softmax - onehot) / rows.
// One thread per row, the mean summed in order by one thread (deterministic).
void softmax_cross_entropy(const float* logits, const int* target, float* dlogits, double* loss, int rows, int classes,
                           cudaStream_t s);
// Layer norm of a rows x cols row-major x, one thread per row, columns summed in order (the host
// reference's order): y = (x - mean) * inv_std * gamma + beta (params: gamma, then beta), keeping
// each row's mean and inv_std = 1 / sqrt(var + eps) for the backward.
void layer_norm_forward(const float* x, float* y, float* mean, float* inv_std, const float* params, int rows, int cols,
                        cudaStream_t s);
// Its input gradient from the kept statistics: dx = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
// dxhat = dy * gamma; one thread per row.
void layer_norm_input_gradient(const float* x, const float* dy, const float* mean, const float* inv_std,
                               const float* params, float* dx, int rows, int cols, cudaStream_t s);
// Its weight gradients, one thread per column, rows in order: dgamma += sum dy * xhat, dbeta += sum dy.
void layer_norm_weight_gradient(const float* x, const float* dy, const float* mean, const float* inv_std, float* grads,
                                int rows, int cols, cudaStream_t s);
// Dropout of n elements: out[i] = in[i] * keep_scale, or 0 with probability per_mille / 1000, element
// i's draw the i-th number of the task's random stream (ctpipe::counter_random::of(layer, microbatch,
// *step, stream)): the mask ctpipe::layers::dropout draws on the host for the same task. `step` is
// device memory (the executor's step word), read by the kernel.
void dropout(const float* in, float* out, int n, unsigned per_mille, float keep_scale, int layer, int microbatch,
             const std::uint64_t* step, std::uint32_t stream, cudaStream_t s);
// Busy-waits `cycles` clock cycles on one thread (for the overlap test and the benchmarks).
void spin(long long cycles, cudaStream_t s);

}  // namespace mlp_kernels

namespace mlp_kernels {
// y = a + b over n floats (a residual join).
void add(const float* a, const float* b, float* y, int n, cudaStream_t s);
// w -= rate * g over n floats.
void sgd(float* w, const float* g, float rate, int n, cudaStream_t s);
// out[i] = the float of bf16 in[i] (exact): a layer computing with a bf16 copy of its weights.
void widen(const ctpipe::bf16* in, float* out, int n, cudaStream_t s);
// out[i] = in[i] rounded to bf16 (as ctpipe's optimizers round the copy they rewrite).
void narrow(const float* in, ctpipe::bf16* out, int n, cudaStream_t s);
}  // namespace mlp_kernels
