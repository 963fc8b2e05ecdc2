// The one order of a layer's term of the global gradient norm, on the host and on the device: the
// gradient's counted elements (all of them, less a later shared-group member's shared part), their
// squares in double, in blocks of norm_block; in each block, value j goes into partial sum
// j mod norm_lanes and the eight partial sums are added in order. Then those block sums, in blocks
// of norm_block, each added the same way; and so on until one sum is left, the layer's term (three
// levels for a layer of up to a billion elements). On the device a block is one thread's work,
// eight independent chains reading 32 contiguous bytes at a time; on the host the eight lanes are
// what the core overlaps (or vectorises). A layer of at most 1,024 elements gets the sum of ctpipe's
// earlier order (element i into partial sum i mod 8 over the whole layer). The terms are then added
// in layer order (optim/optimizer.hpp, cuda/optimizer.hpp).
#pragma once

#include <cstddef>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE, CTPIPE_NOINLINE
#include <ctpipe/optim/rounded.hpp>

namespace ctpipe::detail {

inline constexpr std::size_t norm_block = 1024;
inline constexpr std::size_t norm_lanes = 8;

/// The blocks a level of `n` values makes.
CTPIPE_HOST_DEVICE constexpr std::size_t norm_blocks(std::size_t n) { return (n + norm_block - 1) / norm_block; }

/// Scratch for every level's sums of a layer of `n` counted elements: the first level's blocks,
/// the next level's, ..., down to the level of one (the term).
constexpr std::size_t norm_scratch(std::size_t n) {
  std::size_t total = 0;
  for (std::size_t b = norm_blocks(n); b > 0; b = norm_blocks(b)) {
    total += b;
    if (b == 1) break;
  }
  return total;
}

/// The counted elements of a gradient of `size` elements whose [skip_from, skip_to) is left out.
struct counted_range {
  std::size_t size = 0, skip_from = 0, skip_to = 0;
  CTPIPE_HOST_DEVICE constexpr std::size_t count() const { return size - (skip_to - skip_from); }
  // The element of counted index j.
  CTPIPE_HOST_DEVICE constexpr std::size_t element(std::size_t j) const {
    return j < skip_from ? j : j + (skip_to - skip_from);
  }
};

// Values v(j), j in [first, last) (first a multiple of norm_lanes), added as the order says: value
// j into partial sum j mod norm_lanes, the partial sums then added in order.
template <class Value>
CTPIPE_HOST_DEVICE double lane_sum(const Value& v, std::size_t first, std::size_t last) {
  double part[norm_lanes] = {};
  for (std::size_t j = first; j < last; ++j) part[j % norm_lanes] = rn::add(part[j % norm_lanes], v(j));
  double s = part[0];
  for (std::size_t k = 1; k < norm_lanes; ++k) s = rn::add(s, part[k]);
  return s;
}

/// Block b of the first level: the squares of counted elements [b x norm_block, ...) of g, in
/// double.
template <class T>
CTPIPE_HOST_DEVICE double square_block(const T* g, counted_range c, std::size_t b) {
  const std::size_t n = c.count(), first = b * norm_block, last = first + norm_block < n ? first + norm_block : n;
  return lane_sum(
      [&](std::size_t j) {
        const double x = static_cast<double>(g[c.element(j)]);
        return rn::mul(x, x);
      },
      first, last);
}

/// Block b of a later level: values [b x norm_block, ...) of the `n` in x.
CTPIPE_HOST_DEVICE inline double sum_block(const double* x, std::size_t n, std::size_t b) {
  const std::size_t first = b * norm_block, last = first + norm_block < n ? first + norm_block : n;
  return lane_sum([x](std::size_t j) { return x[j]; }, first, last);
}

/// A layer's term on the host, in the order above; `scratch` holds norm_scratch(c.count())
/// doubles. A whole block that does not straddle the skipped part is read straight through its
/// pointer, eight lanes per pass (which the compiler may vectorise): the same operations in the
/// same order as square_block.
//
// Out of line: g++ 12 at -O2 and -O3, inlining such a loop into a model whose layer holds 16
// parameters, warned (-Waggressive-loop-optimizations) of iterations the length rules out; without
// inlining it has no constant length to warn about. (One call per layer and step.)
template <class T>
CTPIPE_NOINLINE double square_term(const T* g, counted_range c, double* scratch) {
  const std::size_t n = c.count(), blocks = norm_blocks(n);
  if (blocks == 0) return 0.0;
  double* level = scratch;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t first = b * norm_block, last = first + norm_block;
    if (last > n || (first < c.skip_from && last > c.skip_from)) {
      level[b] = square_block(g, c, b);
      continue;
    }
    const T* const p = g + c.element(first);
    double part[norm_lanes] = {};
    for (std::size_t j = 0; j < norm_block; j += norm_lanes)
      for (std::size_t k = 0; k < norm_lanes; ++k) {
        const double x = static_cast<double>(p[j + k]);
        part[k] += x * x;
      }
    double s = part[0];
    for (std::size_t k = 1; k < norm_lanes; ++k) s += part[k];
    level[b] = s;
  }
  for (std::size_t count = blocks; count > 1;) {
    double* const next = level + count;
    const std::size_t made = norm_blocks(count);
    for (std::size_t q = 0; q < made; ++q) next[q] = sum_block(level, count, q);
    level = next;
    count = made;
  }
  return level[0];
}

}  // namespace ctpipe::detail
