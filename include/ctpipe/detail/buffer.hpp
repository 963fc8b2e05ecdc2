// Scratch memory for the analysis passes that works both in constant evaluation and at run time.
//
// C++20 allows new/delete inside constant evaluation as long as everything is freed before the
// evaluation ends ("transient" allocation). The analysis passes need scratch arrays whose size
// depends on the table (positions of matching sends, per-(stage, microbatch) state, ...), and a
// table that escapes a constant evaluation must not own heap memory, so tables themselves are
// fixed-size std::arrays, and only these short-lived buffers use the heap. We do not use
// std::vector in constant evaluation: libstdc++ 12 + clang 14 support it unevenly.
#pragma once

#include <cstddef>

namespace ctpipe::detail {

template <class T>
class buffer {
 public:
  constexpr buffer() = default;
  /// n value-initialised elements (zero for arithmetic types).
  constexpr explicit buffer(std::size_t n) : size_(n), data_(n ? new T[n]() : nullptr) {}
  constexpr buffer(std::size_t n, T init) : buffer(n) { fill(init); }
  constexpr buffer(const buffer&) = delete;
  constexpr buffer& operator=(const buffer&) = delete;
  constexpr buffer(buffer&& o) noexcept : size_(o.size_), data_(o.data_) {
    o.size_ = 0;
    o.data_ = nullptr;
  }
  constexpr buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      delete[] data_;
      size_ = o.size_;
      data_ = o.data_;
      o.size_ = 0;
      o.data_ = nullptr;
    }
    return *this;
  }
  constexpr ~buffer() { delete[] data_; }

  constexpr T& operator[](std::size_t i) { return data_[i]; }
  constexpr const T& operator[](std::size_t i) const { return data_[i]; }
  constexpr std::size_t size() const { return size_; }
  // Hot loops index through data(): operator[] is a call, and each call costs constant-evaluation steps.
  constexpr T* data() { return data_; }
  constexpr const T* data() const { return data_; }
  constexpr T* begin() { return data_; }
  constexpr T* end() { return data_ + size_; }
  constexpr const T* begin() const { return data_; }
  constexpr const T* end() const { return data_ + size_; }
  constexpr void fill(T v) {
    for (std::size_t i = 0; i < size_; ++i) data_[i] = v;
  }

 private:
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

}  // namespace ctpipe::detail
