// A checkpoint's file: reading and writing its bytes, its framing (an 8-byte header length, the
// header, the tensors) checked against the file's size, and its checksums (format/checksum.hpp):
// one per tensor and one over the header, written by every save and checked by every load, so that
// a damaged byte anywhere is refused with what it damaged named, and nothing is loaded.
// The checkpoint itself (what the tensors are, who writes and reads them): optim/checkpoint.hpp.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/format/checksum.hpp>
#include <ctpipe/format/safetensors.hpp>

namespace ctpipe {

/// A checkpoint that cannot be written or read: the file, and what went wrong or does not match.
class checkpoint_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a load asks of a file's checksums. `required` (the default): the file must carry them (every
/// ctpipe writer does), and they must match. `optional`: a file without them (one numpy or another
/// tool wrote) loads unchecked; one with them is still checked. Only the caller can choose
/// `optional`: nothing in a file can turn its own checks off.
enum class checksums { required, optional };

namespace detail {

inline std::string errno_text() { return std::strerror(errno); }

// The directory that holds `file` (synced after a rename into it): what comes before its last '/',
// "/" for a file at the root, "." for a bare name.
inline std::string directory_of(const std::string& file) {
  const std::size_t slash = file.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string("/") : file.substr(0, slash);
}

// Writes all of `bytes` at `offset`, or says why not.
inline bool write_at(int fd, const std::byte* bytes, std::size_t n, std::uint64_t offset, std::string& why) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, bytes, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      why = "writing: " + errno_text();
      return false;
    }
    bytes += w;
    n -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
  return true;
}
inline bool read_at(int fd, std::byte* bytes, std::size_t n, std::uint64_t offset, std::string& why) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, bytes, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      why = r == 0 ? "the file ends early" : "reading: " + errno_text();
      return false;
    }
    bytes += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
  return true;
}

// The 8 bytes that give a header's length.
inline std::array<std::byte, 8> length_bytes(std::uint64_t n) {
  std::array<std::byte, 8> b{};
  for (std::size_t i = 0; i < 8; ++i) b[i] = static_cast<std::byte>(n >> (8 * i));
  return b;
}

// A header's JSON with its checksum written in: `json` holds "ctpipe.header_crc32": "00000000".
inline std::string stamp_header(std::string json) {
  const std::size_t at = safetensors::find_header_checksum(json);
  if (at == std::string::npos)
    throw checkpoint_error("ctpipe checkpoint: the header was written without its checksum's place");
  const std::uint32_t c = safetensors::header_checksum(length_bytes(json.size()), json, at);
  json.replace(at, 8, safetensors::checksum_text(c));
  return json;
}

// A file's header, where its tensors start, and what its checksums say of each tensor (empty where
// the file has no checksums and the load allowed that).
struct file_header {
  safetensors::header h;
  std::uint64_t data_start = 0;
  bool checked = false;  // the file carries checksums (the header's matched)
  std::map<std::string, std::uint32_t, std::less<>> tensor_sums;
};

// Where a header checksum does not hold, or the header does not parse or fit, the header length
// may be what is damaged: the header length that one changed byte of `n` would have been, and
// whose header then carries a checksum that holds (0 where there is none). Only lengths whose
// header ends in '}' and spaces are hashed, so the search costs little beside a load.
inline std::uint64_t repaired_length(int fd, std::uint64_t size, std::uint64_t n) {
  const std::uint64_t limit = std::min<std::uint64_t>(size - 8, std::uint64_t{16} << 20);
  std::string bytes(static_cast<std::size_t>(limit), '\0');
  std::string why;
  if (!read_at(fd, reinterpret_cast<std::byte*>(bytes.data()), bytes.size(), 8, why)) return 0;
  for (std::size_t k = 0; k < 8; ++k)
    for (std::uint64_t v = 0; v < 256; ++v) {
      const std::uint64_t m = (n & ~(std::uint64_t{0xff} << (8 * k))) | v << (8 * k);
      if (m == n || m == 0 || m > limit) continue;
      const std::string_view json = std::string_view(bytes).substr(0, static_cast<std::size_t>(m));
      const std::size_t last = json.find_last_not_of(' ');
      if (last == std::string_view::npos || json[last] != '}') continue;
      try {
        const std::size_t digits = safetensors::find_header_checksum(json);
        std::uint32_t stored = 0;
        if (digits != std::string_view::npos && safetensors::checksum_value(json.substr(digits, 8), stored) &&
            stored == safetensors::header_checksum(length_bytes(m), json, digits))
          return m;
      } catch (const format_error&) {
      }
    }
  return 0;
}

// Reads a file's header, checking its framing against the file's size and its checksum.
inline file_header read_file_header(int fd, const std::string& file, checksums mode) {
  const std::string at = "ctpipe checkpoint " + file + ": ";
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw checkpoint_error(at + errno_text());
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string why;
  std::array<std::byte, 8> len{};
  if (size < 8 || !read_at(fd, len.data(), 8, 0, why))
    throw checkpoint_error(at + std::to_string(size) +
                           " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | std::to_integer<std::uint64_t>(len[static_cast<std::size_t>(i)]);
  // Where the length is what is damaged, says so (and what it should have been); else returns.
  const auto check_length = [&] {
    if (const std::uint64_t m = repaired_length(fd, size, n))
      throw checkpoint_error(at + "its header length is damaged: it says " + std::to_string(n) +
                             " bytes, and the header (its checksum holds) is " + std::to_string(m));
  };
  if (n > size - 8 || n > (std::uint64_t{100} << 20)) {
    check_length();
    throw checkpoint_error(at + "its header length (" + std::to_string(n) + " bytes) does not fit in the file (" +
                           std::to_string(size) + " bytes): the file is truncated, or the length damaged");
  }
  file_header out;
  out.data_start = 8 + n;
  std::string json(static_cast<std::size_t>(n), '\0');
  if (!read_at(fd, reinterpret_cast<std::byte*>(json.data()), json.size(), 8, why)) throw checkpoint_error(at + why);
  std::size_t digits = std::string::npos;
  try {
    digits = safetensors::find_header_checksum(json);
  } catch (const format_error& e) {
    check_length();
    throw checkpoint_error(at + "its header is damaged (" + e.what() + ")");
  }
  if (digits != std::string::npos) {
    std::uint32_t stored = 0;
    (void)safetensors::checksum_value(std::string_view(json).substr(digits, 8), stored);  // (found: 8 digits)
    const std::uint32_t found = safetensors::header_checksum(len, json, digits);
    if (stored != found) {
      check_length();
      throw checkpoint_error(at + "its header is damaged: its checksum is " + safetensors::checksum_text(stored) +
                             " and its bytes give " + safetensors::checksum_text(found));
    }
    out.checked = true;
  }
  try {
    out.h = safetensors::read_header(json, size - 8 - n);
  } catch (const format_error& e) {
    check_length();
    throw checkpoint_error(at + e.what());
  }
  if (!out.checked && mode == checksums::required)
    throw checkpoint_error(at + "it has no checksums (\"" + std::string(safetensors::header_checksum_key) +
                           "\" is not in its metadata): another tool wrote it, or it is damaged; load it with "
                           "ctpipe::checksums::optional to accept a file without checksums");
  // Each tensor's checksum: required beside a header checksum (every ctpipe writer writes both);
  // in a file without one (checksums::optional), each that is there is checked all the same.
  for (const safetensors::entry& e : out.h.tensors) {
    const auto it = out.h.metadata.find(safetensors::tensor_checksum_key(e.name));
    std::uint32_t v = 0;
    if (it != out.h.metadata.end() && safetensors::checksum_value(it->second, v))
      out.tensor_sums.emplace(e.name, v);
    else if (out.checked && mode == checksums::required)
      throw checkpoint_error(at + "tensor \"" + e.name + "\" has no checksum (\"" +
                             safetensors::tensor_checksum_key(e.name) + "\", 8 lowercase hex digits, in the metadata)");
  }
  return out;
}

// Checks a tensor's bytes against the checksum its file gives it (if any).
inline void check_tensor(const file_header& f, const std::string& file, const std::string& name,
                         std::span<const std::byte> bytes) {
  const auto it = f.tensor_sums.find(name);
  if (it == f.tensor_sums.end()) return;
  const std::uint32_t found = safetensors::crc32(bytes);
  if (found != it->second)
    throw checkpoint_error("ctpipe checkpoint " + file + ": tensor \"" + name + "\" is damaged: its checksum is " +
                           safetensors::checksum_text(it->second) + " and its bytes give " +
                           safetensors::checksum_text(found));
}

}  // namespace detail
}  // namespace ctpipe
