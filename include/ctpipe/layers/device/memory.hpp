// What every device layer of ctpipe/layers/device/ builds on: its parameters' device memory, the
// device tensor of a host matrix's shape, and the rows of a microbatch's extent read in a kernel.
//
// Rows past the extent (rows::tokens): a device layer makes its matrix products at the capacity's
// shapes, in eager steps and graphs alike (a graph replays other extents; one shape is one cuBLAS
// algorithm, so eager and graph compute the same bits), and its kernels stop at the extent. What a
// layer receives past the extent is never read as a number: the executors move only the extent's
// rows where they can, so those rows hold whatever was there. The one product that sums over rows
// (a weight gradient) reads copies of its operands with those rows zeroed (masked_as).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE
#include <ctpipe/cuda/ops.hpp>
#include <ctpipe/cuda/tensor.hpp>
#include <ctpipe/layers/dense.hpp>  // rows
#include <ctpipe/model/bf16.hpp>

namespace ctpipe::layers::device {

using ctpipe::cuda::device_ops;

/// The device tensor of a host layer's Rows x Cols matrix: token-major (a token_tensor) where its
/// rows are the microbatch's tokens.
template <std::size_t Rows, std::size_t Cols, rows R = rows::fixed>
using matrix = std::conditional_t<R == rows::tokens, ctpipe::cuda::token_tensor<float, Rows, Cols>,
                                  ctpipe::cuda::tensor<float, Rows, Cols>>;

/// The rows a kernel works on: the extent at `extent` (device memory, read in the kernel), or all
/// `rows` where there is none (a model of fixed shapes) or it is out of range, as the host layers'
/// used_rows.
CTPIPE_HOST_DEVICE constexpr std::size_t rows_in_use(const int* extent, std::size_t rows) noexcept {
  return extent == nullptr || *extent <= 0 || static_cast<std::size_t>(*extent) > rows
             ? rows
             : static_cast<std::size_t>(*extent);
}
/// The extent word a layer of row kind R passes its kernels: the context's where its rows are tokens.
template <rows R>
constexpr const int* extent_of(const ctpipe::cuda::context& c) noexcept {
  return R == rows::tokens ? c.extent : nullptr;
}

/// What a device layer's matrix products read: float (single precision), or bf16 (mixed
/// precision: the layer's weights a bf16 compute copy of its float parameters, its activations and
/// gradients rounded to bf16 as they enter a product, every sum in float; what a product writes,
/// and everything else the layers compute, float).
enum class precision { f32, bf16 };
/// The element a product of precision P reads.
template <precision P>
using operand_t = std::conditional_t<P == precision::bf16, ctpipe::bf16, float>;

/// Element i of a copy of `cols` columns from `offset` of rows `ld` apart: in[r][offset + c] (as T:
/// rounded to the nearest where T is bf16) where row r is in use, 0 past the extent. The copy a
/// product reads in bf16, or over tokens when it sums over rows.
template <class T>
struct masked_as {
  const float* in;
  T* out;
  std::size_t ld, offset, cols, rows;
  const int* extent;
  CTPIPE_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t r = i / cols;
    out[i] = r < rows_in_use(extent, rows) ? T(in[r * ld + offset + i % cols]) : T(0.0f);
  }
};

/// `n` values of T in device memory, zeroed, on the current device until place() moves them,
/// released with the object (none where n is 0). Move-only.
template <device_ops Ops, class T = float>
class array {
  static_assert(std::is_trivially_copyable_v<T>, "ctpipe::layers::device::array: T must be trivially copyable");

 public:
  array() = default;
  explicit array(std::size_t n) : n_(n), device_(Ops::current_device()), p_(allocate(n, device_)) {}
  array(const array&) = delete;
  array& operator=(const array&) = delete;
  array(array&& o) noexcept : n_(std::exchange(o.n_, 0)), device_(o.device_), p_(std::exchange(o.p_, nullptr)) {}
  array& operator=(array&& o) noexcept {
    if (this != &o) {
      reset();
      n_ = std::exchange(o.n_, 0);
      device_ = o.device_;
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  ~array() { reset(); }

  T* data() const noexcept { return p_; }
  /// The device the values are on.
  int device() const noexcept { return device_; }
  /// Moves the values to device `d` (nothing where they are there already).
  void place(int d) {
    if (d == device_ || n_ == 0) {
      device_ = d;
      return;
    }
    T* const to = allocate(n_, d);
    Ops::copy(to, p_, n_ * sizeof(T));
    Ops::release(p_);
    p_ = to;
    device_ = d;
  }
  std::size_t size() const noexcept { return n_; }
  std::span<T> span() const noexcept { return {p_, n_}; }
  /// Copies `h` (exactly size() values) to the device; done when it returns.
  void upload(std::span<const T> h) {
    if (h.size() != n_)
      throw std::invalid_argument("ctpipe::layers::device::array::upload: " + std::to_string(h.size()) +
                                  " values for an array of " + std::to_string(n_));
    if (n_) Ops::upload(p_, h.data(), n_ * sizeof(T));
  }
  /// The values, on the host.
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) Ops::download(h.data(), p_, n_ * sizeof(T));
    return h;
  }

 private:
  static T* allocate(std::size_t n, int d) { return n ? static_cast<T*>(Ops::allocate(n * sizeof(T), d)) : nullptr; }
  void reset() noexcept {
    if (p_) Ops::release(p_);
    p_ = nullptr;
    n_ = 0;
  }
  std::size_t n_ = 0;
  int device_ = 0;
  T* p_ = nullptr;
};

}  // namespace ctpipe::layers::device
