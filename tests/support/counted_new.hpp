// Counts every allocation of a program, for the tests that a step allocates nothing: it replaces
// every form of operator new and delete (aligned ones too: the engines' buffers are cache-line
// aligned) with one that counts. The replacements are definitions, not inline: include this header
// in one source of a program only. (clang's ThreadSanitizer links its runtime's own operator new
// and delete whole, so such a program cannot be built under it: tests/exec/CMakeLists.txt.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace test {
// The allocations so far in this program.
inline std::atomic<long> allocations{0};
}  // namespace test

void* operator new(std::size_t n) {
  test::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  test::allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
