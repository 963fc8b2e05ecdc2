// The device operations of ctpipe/cuda/ops.hpp on the stream simulator, for the device layers of
// ctpipe/layers/device/: a kernel is the host loop of the layer's own per-index function, run when
// the stream reaches it; a matrix product is a plain triple loop in one fixed order (each element
// summed over k in order; bf16 operands widened to float), so that a product's bits depend on its operands alone, never
// on its shape or on the rows around it; memory is the simulator's, on the current device.
#pragma once
#include "stream_sim.hpp"

#include <ctpipe/cuda/ops.hpp>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sim {

struct device_ops {
  // (bf16 operands widened to float exactly: the same loop.)
  template <class In>
  static void gemm(const ctpipe::cuda::context& c, const ctpipe::cuda::basic_product<In>& p) {
    const auto held = hold();
    check(count(call::launch), "a matrix product");
    ++world::get().launches;
    launch(c, {p.a, p.b, p.c}, [p] {
      for (std::size_t q = 0; q < p.count; ++q) {
        const In* a = p.a + q * p.stride_a;
        const In* b = p.b + q * p.stride_b;
        float* out = p.c + q * p.stride_c;
        for (std::size_t i = 0; i < p.m; ++i)
          for (std::size_t j = 0; j < p.n; ++j) {
            float sum = 0.0f;
            for (std::size_t k = 0; k < p.k; ++k)
              sum += static_cast<float>(p.ta ? a[k * p.lda + i] : a[i * p.lda + k]) *
                     static_cast<float>(p.tb ? b[j * p.ldb + k] : b[k * p.ldb + j]);
            if (p.alpha != 1.0f) sum *= p.alpha;
            float& y = out[i * p.ldc + j];
            y = p.beta == 0.0f ? sum : y + sum;
          }
      }
    });
  }
  template <class F>
  static void for_each(const ctpipe::cuda::context& c, std::size_t n, F f) {
    const auto held = hold();
    check(count(call::launch), "a kernel launch");
    ++world::get().launches;
    launch(c, {}, [n, f] {
      for (std::size_t i = 0; i < n; ++i) f(i);
    });
  }
  static int current_device() { return world::current_device(); }
  static void* allocate(std::size_t bytes, int device) {
    void* p = nullptr;
    check(backend::malloc(&p, bytes, device), "cudaMalloc");
    std::memset(p, 0, bytes);
    return p;
  }
  static void release(void* p) { (void)backend::free(p, 0); }
  static void upload(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void download(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

 private:
  static void check(int status, const char* what) {
    if (status != status_code::ok)
      throw std::runtime_error(std::string(what) + " failed: " + backend::describe(status));
  }
};
static_assert(ctpipe::cuda::device_ops<device_ops>);

}  // namespace sim
