// The one way ctpipe adds contributions that come from several places (the members of a shared
// group, the replicas of a data-parallel step): left to right, in a fixed order, so that every
// process that adds them gets the same bits, and so does the sequential reference.
#pragma once

#include <cstddef>
#include <span>

namespace ctpipe::detail {

/// out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ... for i < out.size(): each part holds
/// out.size() elements (out may be one of them; it is written after its element is read).
template <class T>
void sum_in_order(std::span<T> out, std::span<const T* const> parts) noexcept {
  if (parts.empty()) return;
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) {
    T s = parts[0][i];
    for (std::size_t p = 1; p < parts.size(); ++p) s += parts[p][i];
    out[i] = s;
  }
}

}  // namespace ctpipe::detail
