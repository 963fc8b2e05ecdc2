// Launchers of the example's kernels: plain functions on device pointers and a stream, compiled by
// nvcc in kernels.cu. Nothing of ctpipe's compile-time code crosses into device code.
#pragma once

#include <cuda_runtime_api.h>  // cudaStream_t

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
// Busy-waits `cycles` clock cycles on one thread (for the overlap test and the benchmarks).
void spin(long long cycles, cudaStream_t s);

}  // namespace mlp_kernels

namespace mlp_kernels {
// w -= rate * g over n floats.
void sgd(float* w, const float* g, float rate, int n, cudaStream_t s);
}  // namespace mlp_kernels
