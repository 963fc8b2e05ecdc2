// Crossings: values that skip stages. A model shaped like a graph may read, in stage `to`, values that
// stage `from` produced, with stages in between (a residual or a skip connection around them). Such
// values go straight from the rank of `from` to the rank of `to` as one message per microbatch (the
// skip messages of task.hpp), and their gradient comes back the same way; where both stages are on
// one rank, they stay there and no message is sent.
//
// A crossing names stages of one chain (0 .. stages per chain - 1): in a bidirectional table each
// chain has its own copy of it. Values a stage reads from the stage just before it are not a
// crossing: they travel in that boundary's own message.
#pragma once

#include <cstddef>

namespace ctpipe {

/// One pair of stages that a skip connection joins: what stage `from` produces for stage `to`
/// (every tensor of the pair, bundled), `bytes` a microbatch. A table's crossings are listed in
/// increasing order of (from, to), each pair once, with to >= from + 2.
struct crossing {
  int from = 0;
  int to = 0;
  std::size_t bytes = 0;

  friend constexpr bool operator==(const crossing&, const crossing&) = default;
};

namespace detail {
// Does `c` join two stages of a chain of `length` stages, at least two apart? (Lowering passes
// over one that does not; verification reports it.)
constexpr bool crossing_in_range(const crossing& c, int length) {
  return c.from >= 0 && c.to >= c.from + 2 && c.to < length;
}
}  // namespace detail

}  // namespace ctpipe
