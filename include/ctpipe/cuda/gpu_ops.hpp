// The device operations of ctpipe/cuda/ops.hpp on a GPU: cuBLAS products and CUDA kernels, for the
// device layers of ctpipe/layers/device/. A kernel needs nvcc: step an executor of device layers in
// a file nvcc compiles (a .cu file); a host compiler refuses their kernels with a message.
//
// Each stream gets a cuBLAS handle of its own, bound to it, with a workspace of its own of a fixed
// size (so that two streams never share one, and a product captured into a graph allocates
// nothing), in the default math mode (no TF32: single precision as IEEE defines it). It is made at
// the stream's first product, which cannot be inside a graph capture (cuBLAS allocates): where a
// run's first step is a graph step, call gpu_ops::prepare(executor) before it (a product that finds
// no handle while capturing throws, saying so).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <ctpipe/cuda/ops.hpp>
#include <ctpipe/cuda/runtime.hpp>  // the kernel of one thread per index

namespace ctpipe::cuda {

namespace detail {
template <class>
inline constexpr bool kernel_needs_nvcc = false;
}  // namespace detail

struct gpu_ops {
  /// Each cuBLAS handle's workspace (cuBLAS asks for up to 32 MiB on Hopper for its fastest products).
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

  static void gemm(const context& c, const product& p) {
    if (!shape(p)) return;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap.
    check_blas(cublasSgemmStridedBatched(handle(c), op(p.tb), op(p.ta), int(p.n), int(p.m), int(p.k), &p.alpha, p.b,
                                         int(p.ldb), static_cast<long long>(p.stride_b), p.a, int(p.lda),
                                         static_cast<long long>(p.stride_a), &p.beta, p.c, int(p.ldc),
                                         static_cast<long long>(p.stride_c), int(p.count)),
               "cublasSgemmStridedBatched", c);
  }
  /// bf16 operands, float sums (CUBLAS_COMPUTE_32F) into a float C.
  static void gemm(const context& c, const product_bf16& p) {
    if (!shape(p)) return;
    check_blas(cublasGemmStridedBatchedEx(handle(c), op(p.tb), op(p.ta), int(p.n), int(p.m), int(p.k), &p.alpha, p.b,
                                          CUDA_R_16BF, int(p.ldb), static_cast<long long>(p.stride_b), p.a, CUDA_R_16BF,
                                          int(p.lda), static_cast<long long>(p.stride_a), &p.beta, p.c, CUDA_R_32F,
                                          int(p.ldc), static_cast<long long>(p.stride_c), int(p.count),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (bf16)", c);
  }
  template <class F>
  static void for_each(const context& c, std::size_t n, F f) {
    if constexpr (!runtime::launches_kernels) {
      static_assert(detail::kernel_needs_nvcc<F>,
                    "ctpipe::cuda::gpu_ops: a device layer's kernels need nvcc: compile the file that steps the "
                    "executor with nvcc (a .cu file)");
    } else {
      count();
      check(runtime::for_each(n, f, reinterpret_cast<cudaStream_t>(c.stream)), "a kernel launch", &c);
    }
  }
  /// The products and kernels launched so far (a graph's capture counts its launches once; its
  /// replays launch none from the host).
  static std::uint64_t launches() noexcept { return counter().load(std::memory_order_relaxed); }
  static int current_device() {
    int d = 0;
    check(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  }
  static void* allocate(std::size_t bytes, int device) {
    const int was = current_device();
    check(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) e = cudaMemset(p, 0, bytes);
    (void)cudaSetDevice(was);
    if (e != cudaSuccess && p) (void)cudaFree(p);
    check(e, "cudaMalloc");
    return p;
  }
  static void release(void* p) { (void)cudaFree(p); }
  static void upload(void* dst, const void* src, std::size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
  }
  static void download(void* dst, const void* src, std::size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
  }
  static void copy(void* dst, const void* src, std::size_t bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy (between devices)");
  }

  /// Makes the cuBLAS handle of every stream of `exec` (its ranks' streams and second streams), so
  /// that a first step captured into a graph finds them made.
  template <class Executor>
  static void prepare(const Executor& exec) {
    for (int r = 0; r < Executor::ranks; ++r) {
      context c;
      c.rank = r;
      c.device = Executor::devices[static_cast<std::size_t>(r)];
      c.stream = exec.stream(r);
      (void)handle(c);
      c.stream = exec.second_stream(r);
      (void)handle(c);
    }
  }

 private:
  static std::atomic<std::uint64_t>& counter() noexcept {
    static std::atomic<std::uint64_t> n{0};
    return n;
  }
  static void count() noexcept { counter().fetch_add(1, std::memory_order_relaxed); }
  struct slot {
    cudaStream_t stream = nullptr;
    int device = 0;
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
  };
  struct registry {
    std::mutex m;
    std::vector<slot> slots;
  };
  // The handles live as long as the program: destroying them at exit, after CUDA's own teardown may
  // have begun, is not safe.
  static registry& handles() {
    static registry* r = new registry;
    return *r;
  }
  static cublasHandle_t handle(const context& c) {
    const auto stream = reinterpret_cast<cudaStream_t>(c.stream);
    registry& r = handles();
    const std::lock_guard<std::mutex> held(r.m);
    for (slot& s : r.slots)
      if (s.stream == stream && s.device == c.device) return s.handle;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing", &c);
    if (capturing != cudaStreamCaptureStatusNone)
      throw std::logic_error("ctpipe::cuda::gpu_ops: rank " + std::to_string(c.rank) +
                             "'s stream meets its first matrix product inside a graph capture, where its cuBLAS "
                             "handle cannot be made: call ctpipe::cuda::gpu_ops::prepare(executor) before the "
                             "first graph step");
    slot s;
    s.stream = stream;
    s.device = c.device;
    check_blas(cublasCreate(&s.handle), "cublasCreate", c);
    check(cudaMalloc(&s.workspace, workspace_bytes), "cudaMalloc (a cuBLAS workspace)", &c);
    check_blas(cublasSetStream(s.handle, stream), "cublasSetStream", c);
    check_blas(cublasSetWorkspace(s.handle, s.workspace, workspace_bytes), "cublasSetWorkspace", c);
    check_blas(cublasSetMathMode(s.handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", c);
    r.slots.push_back(s);
    return s.handle;
  }
  // Counts the product and checks its sizes fit cuBLAS's int; false where it is empty.
  template <class In>
  static bool shape(const basic_product<In>& p) {
    count();
    static_cast<void>(to_int(p.m, "m")), static_cast<void>(to_int(p.n, "n")), static_cast<void>(to_int(p.k, "k"));
    static_cast<void>(to_int(p.count, "count")), static_cast<void>(to_int(p.lda, "lda"));
    static_cast<void>(to_int(p.ldb, "ldb")), static_cast<void>(to_int(p.ldc, "ldc"));
    return p.m != 0 && p.n != 0 && p.count != 0;
  }
  static cublasOperation_t op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }
  static int to_int(std::size_t v, const char* what) {
    if (v > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error(std::string("ctpipe::cuda::gpu_ops: a product's ") + what + " exceeds cuBLAS's int");
    return static_cast<int>(v);
  }
  static std::string where(const context* c) {
    return c ? " (rank " + std::to_string(c->rank) + ", stage " + std::to_string(c->stage) + ", microbatch " +
                   std::to_string(c->microbatch) + ", layer " + std::to_string(c->layer) + ")"
             : std::string();
  }
  static void check(cudaError_t e, const char* what, const context* c = nullptr) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string("ctpipe::cuda::gpu_ops: ") + what + " failed" + where(c) + ": " +
                               cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  static void check_blas(cublasStatus_t s, const char* what, const context& c) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string("ctpipe::cuda::gpu_ops: ") + what + " failed" + where(&c) +
                               ": cuBLAS status " + std::to_string(static_cast<int>(s)));
  }
};
static_assert(device_ops<gpu_ops>);

}  // namespace ctpipe::cuda
