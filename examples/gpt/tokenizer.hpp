// The GPT example's character-level tokenizer (also read by bench/gpt_pipe.cpp): newline is 0,
// ' ' to '~' are 1 to 95, a tab reads as a space, other bytes are dropped. 96 symbols.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt_example {

inline constexpr std::size_t vocabulary = 96;

/// The id of a byte, or -1 for a byte the tokenizer drops.
inline int id_of(unsigned char ch) {
  if (ch == '\n') return 0;
  if (ch == '\t') ch = ' ';
  if (ch >= ' ' && ch <= '~') return ch - ' ' + 1;
  return -1;
}
/// The character of an id.
inline char symbol(std::int32_t id) { return id == 0 ? '\n' : static_cast<char>(' ' + id - 1); }

/// A text file's ids.
inline std::vector<std::int32_t> read_ids(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the text file '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::int32_t> ids;
  ids.reserve(text.size());
  for (char ch : text)
    if (const int id = id_of(static_cast<unsigned char>(ch)); id >= 0) ids.push_back(id);
  return ids;
}

}  // namespace gpt_example
