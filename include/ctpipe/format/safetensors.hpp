// The safetensors layout: an 8-byte little-endian length N, a JSON header of N bytes, then the
// tensors' bytes, little-endian, end to end. The header maps each tensor's name to its dtype, shape
// and [begin, end) in the byte buffer; "__metadata__" maps names to strings. This is the format
// Hugging Face's safetensors library reads and writes (and numpy alone can: tools/safetensors.py).
//
// This header writes a header and reads one back, strictly: a JSON object of those entries and
// nothing else, each name once, every dtype known, each tensor's bytes its shape's, the tensors
// covering the buffer end to end. Anything else is a format_error that says what is wrong. No
// JSON library: the subset is small, and the reader is fuzzed (tests/tools/fuzz).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <ctpipe/format/csv.hpp>  // format_error

namespace ctpipe::safetensors {

/// One tensor of a file: its name, dtype ("F32", ...), shape, and [begin, end) in the byte buffer
/// that follows the header.
struct entry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;
  friend bool operator==(const entry&, const entry&) = default;
};

/// A header: the tensors (in the order of their bytes) and the metadata.
struct header {
  std::vector<entry> tensors;
  std::map<std::string, std::string> metadata;
  /// The bytes of the buffer the tensors cover.
  std::uint64_t data_bytes() const { return tensors.empty() ? 0 : tensors.back().end; }
};

/// The bytes of one element of a dtype, or 0 for a name safetensors does not know.
inline std::size_t dtype_size(std::string_view d) {
  static constexpr std::pair<std::string_view, std::size_t> known[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  for (const auto& [name, size] : known)
    if (name == d) return size;
  return 0;
}

/// The dtype of element type T (float: "F32", double: "F64", ...).
template <class T>
constexpr std::string_view dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return "F32";
  else if constexpr (std::is_same_v<T, double>)
    return "F64";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "I64";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "I32";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "U8";
  else
    static_assert(sizeof(T) == 0, "ctpipe::safetensors: no dtype for this element type");
}

namespace detail {

inline void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[(c >> 4) & 0xf];
          out += hex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// A strict reader of the header's JSON subset: objects, strings, arrays of unsigned integers.
class reader {
 public:
  explicit reader(std::string_view text) : s_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw format_error("safetensors header, byte " + std::to_string(i_) + ": " + what);
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool peek(char c) {
    space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    space();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  // Between two members of an object: a ',' (the '}' that ends it was looked for first).
  void separator() {
    space();
    if (i_ >= s_.size()) fail("the header ends before its object's '}'");
    if (s_[i_] != ',') fail("expected ',' or '}'");
    ++i_;
  }
  bool done() {
    space();
    return i_ == s_.size();
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("a string that does not end");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("a string that does not end");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (s_.size() - i_ < 4) fail("a \\u escape needs four hex digits");
          unsigned v = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            v <<= 4;
            if (h >= '0' && h <= '9')
              v |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
              v |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              v |= static_cast<unsigned>(h - 'A' + 10);
            else
              fail("a \\u escape needs four hex digits");
          }
          if (v >= 0xd800 && v <= 0xdfff) fail("a \\u escape of a surrogate (names are kept to the basic plane)");
          if (v < 0x80) {
            out += static_cast<char>(v);
          } else if (v < 0x800) {
            out += static_cast<char>(0xc0 | (v >> 6));
            out += static_cast<char>(0x80 | (v & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (v >> 12));
            out += static_cast<char>(0x80 | ((v >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (v & 0x3f));
          }
          break;
        }
        default:
          fail(std::string("an unknown escape \\") + e);
      }
    }
  }
  std::uint64_t number() {
    space();
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("expected an unsigned integer");
    if (s_[i_] == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9')
      fail("a number with a leading 0");
    std::uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) fail("a number too large");
      v = v * 10 + d;
      ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) fail("expected an unsigned integer");
    return v;
  }
  std::vector<std::uint64_t> numbers() {
    std::vector<std::uint64_t> v;
    expect('[');
    if (peek(']')) {
      expect(']');
      return v;
    }
    do {
      if (v.size() >= 64) fail("an array too long");
      v.push_back(number());
      if (!peek(',')) break;
      expect(',');
    } while (true);
    expect(']');
    return v;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace detail

/// The header's JSON: the tensors in their order, then the metadata, padded with spaces to a
/// multiple of 8 bytes (as safetensors writes it, so that the buffer starts aligned).
inline std::string write_header(const header& h) {
  std::string out = "{";
  bool first = true;
  for (const entry& e : h.tensors) {
    if (!first) out += ',';
    first = false;
    detail::append_string(out, e.name);
    out += ":{\"dtype\":";
    detail::append_string(out, e.dtype);
    out += ",\"shape\":[";
    for (std::size_t i = 0; i < e.shape.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(e.shape[i]);
    }
    out += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
  }
  if (!h.metadata.empty()) {
    if (!first) out += ',';
    out += "\"__metadata__\":{";
    bool m = true;
    for (const auto& [k, v] : h.metadata) {
      if (!m) out += ',';
      m = false;
      detail::append_string(out, k);
      out += ':';
      detail::append_string(out, v);
    }
    out += '}';
  }
  out += '}';
  while (out.size() % 8 != 0) out += ' ';
  return out;
}

/// Reads a header's JSON, for a buffer of `data_bytes` bytes after it; throws format_error saying
/// what is wrong (the byte, or the tensor). The tensors come back in the order of their bytes.
inline header read_header(std::string_view json, std::uint64_t data_bytes) {
  detail::reader r(json);
  header h;
  r.expect('{');
  bool any = false;
  bool metadata_seen = false;
  while (!r.peek('}')) {
    if (any) r.separator();
    any = true;
    std::string name = r.string();
    r.expect(':');
    if (name == "__metadata__") {
      if (metadata_seen) r.fail("\"__metadata__\" twice");
      metadata_seen = true;
      r.expect('{');
      bool m = false;
      while (!r.peek('}')) {
        if (m) r.separator();
        m = true;
        std::string k = r.string();
        r.expect(':');
        std::string v = r.string();
        if (!h.metadata.emplace(std::move(k), std::move(v)).second) r.fail("a metadata name twice");
      }
      r.expect('}');
      continue;
    }
    entry e;
    e.name = std::move(name);
    if (e.name.empty()) r.fail("a tensor without a name");
    bool dtype = false, shape = false, offsets = false;
    r.expect('{');
    bool f = false;
    while (!r.peek('}')) {
      if (f) r.separator();
      f = true;
      const std::string key = r.string();
      r.expect(':');
      if (key == "dtype" && !dtype) {
        e.dtype = r.string();
        dtype = true;
      } else if (key == "shape" && !shape) {
        e.shape = r.numbers();
        shape = true;
      } else if (key == "data_offsets" && !offsets) {
        const std::vector<std::uint64_t> o = r.numbers();
        if (o.size() != 2) r.fail("tensor \"" + e.name + "\": data_offsets must be [begin, end]");
        e.begin = o[0];
        e.end = o[1];
        offsets = true;
      } else {
        r.fail("tensor \"" + e.name + "\": an unexpected or repeated field \"" + key + "\"");
      }
    }
    r.expect('}');
    if (!dtype || !shape || !offsets) r.fail("tensor \"" + e.name + "\": needs dtype, shape and data_offsets");
    h.tensors.push_back(std::move(e));
  }
  r.expect('}');
  if (!r.done()) r.fail("bytes after the header's object (only spaces may pad it)");
  std::sort(h.tensors.begin(), h.tensors.end(), [](const entry& a, const entry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < h.tensors.size(); ++i)
    if (h.tensors[i].name == h.tensors[i - 1].name)
      throw format_error("safetensors header: tensor \"" + h.tensors[i].name + "\" twice");
  std::sort(h.tensors.begin(), h.tensors.end(), [](const entry& a, const entry& b) {  // (empty ones: by name)
    return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
  });
  std::uint64_t at = 0;
  for (const entry& e : h.tensors) {
    const std::size_t size = dtype_size(e.dtype);
    if (size == 0)
      throw format_error("safetensors header: tensor \"" + e.name + "\": unknown dtype \"" + e.dtype + "\"");
    std::uint64_t n = size;
    for (const std::uint64_t d : e.shape) {
      if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d)
        throw format_error("safetensors header: tensor \"" + e.name + "\": a shape too large");
      n *= d;
    }
    if (e.begin != at || e.end < e.begin || e.end - e.begin != n)
      throw format_error("safetensors header: tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) +
                         ", " + std::to_string(e.end) + "] where its shape and dtype need " + std::to_string(n) +
                         " bytes from " + std::to_string(at) + " (tensors lie end to end)");
    at = e.end;
  }
  if (at != data_bytes)
    throw format_error("safetensors: the tensors cover " + std::to_string(at) + " bytes, and the file holds " +
                       std::to_string(data_bytes) + " after the header");
  return h;
}

}  // namespace ctpipe::safetensors
