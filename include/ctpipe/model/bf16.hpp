// bfloat16 as storage: the upper 16 bits of an IEEE float (sign, 8 exponent bits, 7 mantissa
// bits), laid out as CUDA's __nv_bfloat16, so that a span of either is a span of the other's bytes.
// Made from a float by rounding to the nearest, ties to even (as __float2bfloat16_rn does; a NaN
// stays a NaN), read back as a float exactly. It is a type to keep and move values in; arithmetic
// is done in float. Usable on the host without CUDA, and in kernels (CTPIPE_HOST_DEVICE).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <ctpipe/config.hpp>  // CTPIPE_HOST_DEVICE

namespace ctpipe {

struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;
  /// x rounded to the nearest bfloat16, ties to even; a NaN becomes a quiet NaN of the same sign.
  CTPIPE_HOST_DEVICE explicit bf16(float x) {
    std::uint32_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((u >> 16) | 0x0040u);
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<std::uint16_t>(u >> 16);
  }
  /// The value, exactly.
  CTPIPE_HOST_DEVICE explicit operator float() const {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float x = 0.0f;
    std::memcpy(&x, &u, sizeof x);
    return x;
  }
  CTPIPE_HOST_DEVICE static bf16 from_bits(std::uint16_t b) {
    bf16 h;
    h.bits = b;
    return h;
  }
  friend bool operator==(bf16, bf16) = default;
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2 && std::is_trivially_copyable_v<bf16>,
              "ctpipe::bf16 must be laid out as __nv_bfloat16");

}  // namespace ctpipe
