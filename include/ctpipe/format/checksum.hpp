// Checksums of a safetensors file, as ctpipe's checkpoints carry them in the header's metadata:
//
//   "ctpipe.crc32.<tensor>": the CRC-32 of that tensor's bytes;
//   "ctpipe.header_crc32":   the CRC-32 of the file's first 8 + N bytes (the header length and the
//                            header, padding included) with this value's own 8 digits read as "00000000".
//
// Each value is 8 lowercase hex digits. CRC-32 is zlib's (the polynomial of Ethernet, gzip and PNG),
// so that any language checks a file with its zlib (Python: zlib.crc32; tools/safetensors.py).
// A single damaged byte anywhere in a file changes one of these sums: the header length, the
// header's JSON, its padding or a tensor's data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <ctpipe/format/csv.hpp>  // format_error

namespace ctpipe::safetensors {

namespace detail {
// Slicing-by-8 tables for the reflected polynomial 0xEDB88320 (table 0 is the byte-at-a-time one),
// made on first use: at run time, so that a program that includes this pays no compile time for them.
inline const std::array<std::array<std::uint32_t, 256>, 8>& crc32_tables() {
  static const auto tables = [] {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::size_t s = 1; s < 8; ++s)
      for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
    return t;
  }();
  return tables;
}
}  // namespace detail

/// zlib's crc32(crc, bytes): the CRC-32 of `bytes`, continuing from `crc` (0 to start).
inline std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept {
  const auto& t = detail::crc32_tables();
  std::uint32_t c = ~crc;
  const std::byte* p = bytes.data();
  std::size_t n = bytes.size();
  for (; n >= 8; n -= 8, p += 8) {
    const std::uint32_t lo =
        c ^ (std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
             std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24);
    c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
        t[3][std::to_integer<std::uint32_t>(p[4])] ^ t[2][std::to_integer<std::uint32_t>(p[5])] ^
        t[1][std::to_integer<std::uint32_t>(p[6])] ^ t[0][std::to_integer<std::uint32_t>(p[7])];
  }
  for (; n > 0; --n, ++p) c = t[0][(c ^ std::to_integer<std::uint32_t>(*p)) & 0xffu] ^ (c >> 8);
  return ~c;
}
inline std::uint32_t crc32(std::string_view text, std::uint32_t crc = 0) noexcept {
  return crc32(std::as_bytes(std::span<const char>(text.data(), text.size())), crc);
}

/// The metadata key of the header's checksum, and of a tensor's.
inline constexpr std::string_view header_checksum_key = "ctpipe.header_crc32";
inline std::string tensor_checksum_key(std::string_view tensor) { return "ctpipe.crc32." + std::string(tensor); }

/// A checksum as the metadata holds it: 8 lowercase hex digits.
inline std::string checksum_text(std::uint32_t v) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = hex[v & 0xfu];
  return s;
}
/// Reads checksum_text's 8 digits into `v`; false where `s` is not 8 lowercase hex digits (another
/// case of a digit is another byte: a damaged one).
inline bool checksum_value(std::string_view s, std::uint32_t& v) {
  if (s.size() != 8) return false;
  v = 0;
  for (const char c : s) {
    if (c >= '0' && c <= '9')
      v = v << 4 | static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v << 4 | static_cast<std::uint32_t>(c - 'a' + 10);
    else
      return false;
  }
  return true;
}

/// Where the header checksum's 8 digits stand in a header's JSON: after its key, ':' and '"',
/// white space allowed around the ':'; std::string_view::npos where the key does not appear. A
/// format_error where it appears more than once or without 8 digits and a closing '"' after it.
inline std::size_t find_header_checksum(std::string_view json) {
  const std::string quoted = "\"" + std::string(header_checksum_key) + "\"";
  const std::size_t at = json.find(quoted);
  if (at == std::string_view::npos) return std::string_view::npos;
  if (json.find(quoted, at + 1) != std::string_view::npos)
    throw format_error("safetensors header: \"" + std::string(header_checksum_key) + "\" appears twice");
  std::size_t i = at + quoted.size();
  const auto space = [&] {
    while (i < json.size() && (json[i] == ' ' || json[i] == '\n' || json[i] == '\r' || json[i] == '\t')) ++i;
  };
  space();
  const bool colon = i < json.size() && json[i] == ':';
  ++i;
  space();
  std::uint32_t v = 0;
  if (!colon || i >= json.size() || json[i] != '"' || json.size() - i < 10 || json[i + 9] != '"' ||
      !checksum_value(json.substr(i + 1, 8), v))
    throw format_error("safetensors header: \"" + std::string(header_checksum_key) +
                       "\" is not followed by 8 lowercase hex digits");
  return i + 1;
}

/// The header checksum of a file whose first 8 + json.size() bytes are `length` and `json`, the
/// checksum's digits at `digits` (find_header_checksum) read as "00000000".
inline std::uint32_t header_checksum(std::span<const std::byte, 8> length, std::string_view json, std::size_t digits) {
  std::uint32_t c = crc32(std::span<const std::byte>(length));
  c = crc32(json.substr(0, digits), c);
  c = crc32("00000000", c);
  return crc32(json.substr(digits + 8), c);
}

}  // namespace ctpipe::safetensors
