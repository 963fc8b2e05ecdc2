// The CUDA runtime API as the CUDA executor's backend: every function returns the cudaError_t of
// the call it makes; the executor checks each one and names the call and the task in its error.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>

#include <cublas_v2.h>         // cublasSaxpy, cublasDaxpy: the sum of a graph model's gradient terms
#include <cuda_runtime_api.h>  // cudaStream_t, cudaEvent_t, cudaGraphExec_t and the calls

#if defined(CTPIPE_CUDA_NVTX) && CTPIPE_CUDA_NVTX
#include <nvtx3/nvToolsExt.h>  // nvtxDomainRangePushEx (header-only NVTX v3, part of the CUDA Toolkit)
#endif

namespace ctpipe::cuda {

#if defined(__CUDACC__)
namespace detail {
// One thread per index of [0, n): Backend::for_each's kernel.
template <class F>
__global__ void each_index(std::size_t n, F f) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}
}  // namespace detail
#endif

struct runtime {
  using status = cudaError_t;
  using stream_type = cudaStream_t;
  using event_type = cudaEvent_t;
  using graph_type = cudaGraphExec_t;

  static bool ok(status s) noexcept { return s == cudaSuccess; }
  // A cuBLAS status as the nearest CUDA error (the executor reports CUDA errors).
  static status from_blas(cublasStatus_t b) noexcept {
    switch (b) {
      case CUBLAS_STATUS_SUCCESS:
        return cudaSuccess;
      case CUBLAS_STATUS_ALLOC_FAILED:
        return cudaErrorMemoryAllocation;
      case CUBLAS_STATUS_NOT_INITIALIZED:
        return cudaErrorInitializationError;
      case CUBLAS_STATUS_INVALID_VALUE:
        return cudaErrorInvalidValue;
      case CUBLAS_STATUS_ARCH_MISMATCH:
        return cudaErrorNoKernelImageForDevice;
      default:
        return cudaErrorUnknown;
    }
  }
  static int code(status s) noexcept { return static_cast<int>(s); }
  static std::string describe(status s) {
    return std::string(cudaGetErrorName(s)) + " (" + cudaGetErrorString(s) + ")";
  }
  static CUstream_st* handle(stream_type s) noexcept { return s; }

  static status device_count(int* n) { return cudaGetDeviceCount(n); }
  static status set_device(int d) { return cudaSetDevice(d); }
  // Peer access where the hardware allows it; "already enabled" is not an error.
  static status enable_peer_access(int device, int peer) {
    int can = 0;
    if (status s = cudaDeviceCanAccessPeer(&can, device, peer); s != cudaSuccess || !can) return s;
    if (status s = cudaSetDevice(device); s != cudaSuccess) return s;
    const status s = cudaDeviceEnablePeerAccess(peer, 0);
    if (s == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // clear it
      return cudaSuccess;
    }
    return s;
  }
  static status stream_create(stream_type* s, int device) {
    if (status e = cudaSetDevice(device); e != cudaSuccess) return e;
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  }
  static status stream_destroy(stream_type s) { return cudaStreamDestroy(s); }
  static status event_create(event_type* e, int device) {
    if (status s = cudaSetDevice(device); s != cudaSuccess) return s;
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  }
  static status event_destroy(event_type e) { return cudaEventDestroy(e); }
  // An event that keeps its time (record_steps: each task's start and end), and the time between
  // two of them, both recorded and complete, on one device: milliseconds, to about 0.5 us.
  static status timing_event_create(event_type* e, int device) {
    if (status s = cudaSetDevice(device); s != cudaSuccess) return s;
    return cudaEventCreate(e);
  }
  static status elapsed_ms(float* ms, event_type from, event_type to) { return cudaEventElapsedTime(ms, from, to); }
  static status malloc(void** p, std::size_t bytes, int device) {
    if (status s = cudaSetDevice(device); s != cudaSuccess) return s;
    return cudaMalloc(p, bytes);
  }
  static status free(void* p, int /*device*/) { return cudaFree(p); }
  static status host_malloc(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
  static status host_free(void* p) { return cudaFreeHost(p); }

  static status memcpy_async(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
                             stream_type s) {
    if (dst_device == src_device) return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    return cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s);
  }
  static status copy_to_host_async(void* dst, const void* src, std::size_t bytes, stream_type s) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
  }
  static status copy_to_device_async(void* dst, const void* src, std::size_t bytes, stream_type s) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
  }
  static status memset_async(void* p, std::size_t bytes, stream_type s) { return cudaMemsetAsync(p, 0, bytes, s); }

  // dst += src, element by element, on stream s: how the executor sums a graph model's gradient
  // terms (a tensor read by several layers). cuBLAS's axpy with alpha = 1, whose every element is
  // one IEEE addition (1 * x is exact, and a fused multiply-add of it rounds once): the bits of
  // `dst[i] + src[i]` on the host. One cuBLAS handle per device, made at construction.
  using adder_type = cublasHandle_t;
  static status adder_create(adder_type* h, int device) {
    if (status s = cudaSetDevice(device); s != cudaSuccess) return s;
    return from_blas(cublasCreate(h));
  }
  static status adder_destroy(adder_type h) { return from_blas(cublasDestroy(h)); }
  template <class T>
  static status add(adder_type h, T* dst, const T* src, std::size_t count, stream_type s) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "ctpipe::cuda::runtime: a graph model's tensors read by several layers sum their gradients with "
                  "cuBLAS's axpy: float or double elements");
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) return cudaErrorInvalidValue;
    if (status e = from_blas(cublasSetStream(h, s)); e != cudaSuccess) return e;
    const T one = 1;
    const int n = static_cast<int>(count);
    if constexpr (std::is_same_v<T, float>)
      return from_blas(cublasSaxpy(h, n, &one, src, 1, dst, 1));
    else
      return from_blas(cublasDaxpy(h, n, &one, src, 1, dst, 1));
  }
  // f(i) for every i in [0, n), a thread each, on stream s: the device optimizer's kernels
  // (cuda/detail/update_kernels.hpp). A kernel needs nvcc: a file compiled by a host compiler
  // launches nothing (ctpipe::cuda::device_optimizer refuses to compile there, saying so).
  static constexpr bool launches_kernels =
#if defined(__CUDACC__)
      true;
#else
      false;
#endif
  template <class F>
  static status for_each(std::size_t n, const F& f, stream_type s) {
#if defined(__CUDACC__)
    if (n == 0) return cudaSuccess;
    constexpr unsigned threads = 256;
    detail::each_index<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, s>>>(n, f);
    return cudaGetLastError();
#else
    static_cast<void>(n), static_cast<void>(f), static_cast<void>(s);
    return cudaErrorNotSupported;
#endif
  }
  static status record(event_type e, stream_type s) { return cudaEventRecord(e, s); }
  static status wait(stream_type s, event_type e) { return cudaStreamWaitEvent(s, e, 0); }
  static status synchronize(stream_type s) { return cudaStreamSynchronize(s); }
  static status event_synchronize(event_type e) { return cudaEventSynchronize(e); }
  // Done (ok), not yet (not_ready), or an error.
  static status query(stream_type s) { return cudaStreamQuery(s); }
  static status event_query(event_type e) { return cudaEventQuery(e); }
  static bool not_ready(status s) noexcept { return s == cudaErrorNotReady; }
  static status last_error() { return cudaGetLastError(); }

  // Graphs: capture from the origin stream (other streams join through the fork event), then
  // instantiate; the executor keeps only the executable graph.
  static status begin_capture(stream_type s) { return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); }
  static status end_capture(stream_type s, graph_type* exec) {
    cudaGraph_t g = nullptr;
    if (status e = cudaStreamEndCapture(s, &g); e != cudaSuccess) {
      if (g) (void)cudaGraphDestroy(g);
      return e;
    }
    const status e = cudaGraphInstantiate(exec, g, 0);
    (void)cudaGraphDestroy(g);
    return e;
  }
  static status graph_launch(graph_type g, stream_type s) { return cudaGraphLaunch(g, s); }
  static status graph_destroy(graph_type g) { return cudaGraphExecDestroy(g); }

  // NVTX ranges around every task ("F s3 mb5"), in the "ctpipe" domain, coloured by op.
#if defined(CTPIPE_CUDA_NVTX) && CTPIPE_CUDA_NVTX
  static nvtxDomainHandle_t domain() {
    static const nvtxDomainHandle_t d = nvtxDomainCreateA("ctpipe");
    return d;
  }
  static void range_push(const char* label) noexcept {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = label[0] == 'F' ? 0xFF4C9BE8u : label[0] == 'B' ? 0xFFE8844Cu : 0xFF9A9A9Au;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = label;
    nvtxDomainRangePushEx(domain(), &a);
  }
  static void range_pop() noexcept { nvtxDomainRangePop(domain()); }
#else
  static void range_push(const char*) noexcept {}
  static void range_pop() noexcept {}
#endif
};

}  // namespace ctpipe::cuda
