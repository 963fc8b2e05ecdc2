// What the device layers (ctpipe/layers/device/) ask of a device: matrix products, kernels of one
// thread per index, and memory, all on the task's stream. Written once against this, a layer runs
// on a GPU (ctpipe::cuda::device_ops: cuBLAS and CUDA kernels, in a file nvcc compiles) and on any
// other implementation of it (ctpipe's tests run the device layers on a stream simulator whose
// kernels are host loops of the very same per-index functions). No CUDA header here.
#pragma once

#include <concepts>
#include <cstddef>

#include <ctpipe/config.hpp>      // CTPIPE_HOST_DEVICE
#include <ctpipe/cuda/layer.hpp>  // context
#include <ctpipe/model/bf16.hpp>

namespace ctpipe::cuda {

/// A row-major matrix product on the task's stream: C (m x n, leading dimension ldc) = alpha op(A)
/// op(B) + beta C, op(A) m x k (A^T where `ta`: A stored k x m), op(B) k x n (B^T where `tb`);
/// `count` of them, each operand advanced by its stride from one to the next (the heads of an
/// attention). beta is 0 (C is only written) or 1 (C accumulates). A and B hold In: float, or
/// ctpipe::bf16 (mixed precision: each product of two elements exact in float, the sums in float);
/// C is float.
template <class In>
struct basic_product {
  std::size_t m = 0, n = 0, k = 0;
  const In* a = nullptr;
  std::size_t lda = 0;
  bool ta = false;
  const In* b = nullptr;
  std::size_t ldb = 0;
  bool tb = false;
  float* c = nullptr;
  std::size_t ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  std::size_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};
/// Single precision (IEEE: a GPU's products without TF32).
using product = basic_product<float>;
/// bf16 operands, float sums and result.
using product_bf16 = basic_product<bf16>;

namespace detail {
// A kernel body of one index, for the concept below.
struct index_probe {
  CTPIPE_HOST_DEVICE void operator()(std::size_t) const {}
};
}  // namespace detail

/// A device's operations as the device layers call them, each a static function that throws
/// (std::runtime_error, naming the call) where the device refuses it:
///   gemm(ctx, product)     a matrix product on ctx's stream (a product, and a product_bf16);
///   for_each(ctx, n, f)    f(i) for every i in [0, n) on ctx's stream (a GPU: a thread per i), f a
///                          CTPIPE_HOST_DEVICE functor taken by value;
///   current_device()       the calling thread's current device;
///   allocate(bytes, dev)   memory on device `dev`, zeroed (done when it returns);
///   release(p)             frees it;
///   upload(dst, src, n)    n bytes from the host to the device, done when it returns;
///   download(dst, src, n)  and back;
///   copy(dst, src, n)      from device memory to device memory, of one device or two, done when it
///                          returns.
/// The last four are for setting up: never while a step is in flight.
template <class Ops>
concept device_ops = requires(const context& c, const product& p, const product_bf16& h, std::size_t n, void* d,
                              const void* s, int dev) {
  Ops::gemm(c, p);
  Ops::gemm(c, h);
  Ops::for_each(c, n, detail::index_probe{});
  { Ops::current_device() } -> std::same_as<int>;
  { Ops::allocate(n, dev) } -> std::same_as<void*>;
  Ops::release(d);
  Ops::upload(d, s, n);
  Ops::download(d, s, n);
  Ops::copy(d, s, n);
};

}  // namespace ctpipe::cuda
