// A backend for the CUDA executor whose calls do nothing, and layers that launch nothing: what is
// left of a step is ctpipe's own work. Used by bench_cuda_issue_overhead and cuda_executor_build.sh.
#pragma once

#include <ctpipe/cuda/executor.hpp>
#include <ctpipe/cuda/tensor.hpp>

#include <cstdlib>
#include <string>

namespace null_device {

// Keeps a value alive for the optimiser without a library (the same trick as Google Benchmark's).
template <class T>
inline void keep(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

struct null_backend {
  using status = int;
  using stream_type = int*;
  using event_type = int*;
  using graph_type = int*;
  static inline int object = 0;
  static bool ok(status s) noexcept { return s == 0; }
  static int code(status s) noexcept { return s; }
  static std::string describe(status) { return "null"; }
  static CUstream_st* handle(stream_type s) noexcept { return reinterpret_cast<CUstream_st*>(s); }
  static status device_count(int* n) { return *n = 1, 0; }
  static status set_device(int) { return 0; }
  static status enable_peer_access(int, int) { return 0; }
  static status stream_create(stream_type* s, int) { return *s = &object, 0; }
  static status stream_destroy(stream_type) { return 0; }
  static status event_create(event_type* e, int) { return *e = &object, 0; }
  static status event_destroy(event_type) { return 0; }
  static status timing_event_create(event_type* e, int) { return *e = &object, 0; }
  static status elapsed_ms(float* ms, event_type, event_type) { return *ms = 0.0f, 0; }
  static status malloc(void** p, std::size_t n, int) { return *p = std::malloc(n), 0; }
  static status free(void* p, int) { return std::free(p), 0; }
  static status host_malloc(void** p, std::size_t n) { return *p = std::malloc(n), 0; }
  static status host_free(void* p) { return std::free(p), 0; }
  static status memcpy_async(void*, int, const void*, int, std::size_t, stream_type) { return 0; }
  static status copy_to_host_async(void*, const void*, std::size_t, stream_type) { return 0; }
  static status copy_to_device_async(void*, const void*, std::size_t, stream_type) { return 0; }
  static status memset_async(void*, std::size_t, stream_type) { return 0; }
  static status record(event_type, stream_type) { return 0; }
  static status wait(stream_type, event_type) { return 0; }
  static status synchronize(stream_type) { return 0; }
  static status event_synchronize(event_type) { return 0; }
  static status event_query(event_type) { return 0; }
  static status last_error() { return 0; }
  static status begin_capture(stream_type) { return 0; }
  static status end_capture(stream_type, graph_type* g) { return *g = &object, 0; }
  static status graph_launch(graph_type, stream_type) { return 0; }
  static status graph_destroy(graph_type) { return 0; }
  static void range_push(const char*) noexcept {}
  static void range_pop() noexcept {}
};

struct empty_layer {
  using input_type = ctpipe::cuda::tensor<float, 1>;
  using output_type = ctpipe::cuda::tensor<float, 1>;
  static constexpr double cost = 1.0;
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) { keep(c), keep(x), keep(y); }
  void backward(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy,
                input_type& dx) {
    keep(c), keep(x), keep(dy), keep(dx);
  }
};
struct empty_loss {
  using target_type = ctpipe::cuda::tensor<int, 1>;
  void operator()(const ctpipe::cuda::context&, const empty_layer::output_type&, const target_type&,
                  empty_layer::output_type&, double* loss) const {
    keep(loss);
  }
};
using net = ctpipe::model<empty_layer, empty_layer>;

// The same, with its backward split (I and W), for the split-backward schedules.
struct empty_split_layer : empty_layer {
  void backward_input(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy,
                      input_type& dx) {
    keep(c), keep(x), keep(dy), keep(dx);
  }
  void backward_weight(const ctpipe::cuda::context& c, const input_type& x, const output_type&, const output_type& dy) {
    keep(c), keep(x), keep(dy);
  }
};
using split_net = ctpipe::model<empty_split_layer, empty_split_layer, empty_split_layer, empty_split_layer>;

}  // namespace null_device
