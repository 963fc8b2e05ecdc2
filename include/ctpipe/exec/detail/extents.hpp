// How a message of a model with token-major tensors (ctpipe/model/extent.hpp) crosses between
// stages: with its microbatch's extent beside it, and only the tokens that extent uses copied.
//  - Between threads, a slot (a ring's, or a same-rank hand-off's) is a `carried` message: the
//    extent, then the message at full capacity, of which a copy writes each part's used prefix.
//  - Between processes, it is packed: an 8-byte header (the extent), then each part's used bytes
//    back to back (pack, unpack).
// A message is a tensor, a ctpipe::tensors of them, or a graph stage's bundle (exec/detail/
// graph_stages.hpp); its parts are single tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/exec/detail/graph_stages.hpp>  // bundle
#include <ctpipe/model/extent.hpp>
#include <ctpipe/model/tensors.hpp>

namespace ctpipe::detail {

// The single tensors of message M, in order, as a std::tuple of their types.
template <class M>
struct message_parts {
  using type = parts_t<M>;  // a tensor, or a ctpipe::tensors
};
template <class... P>
struct message_parts<bundle<P...>> {
  using type = std::tuple<P...>;
};

// Part I of message m.
template <std::size_t I, class M>
constexpr auto& message_part(M& m) noexcept {
  if constexpr (requires { m.head; })
    return bundle_part<I>(m);
  else
    return part<I>(m);
}

// f(to_part, from_part) for each part of two messages of one type.
template <class M, class F>
constexpr void each_message_part(M& to, const M& from, F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(message_part<I>(to), message_part<I>(from)), ...); }
  (std::make_index_sequence<std::tuple_size_v<typename message_parts<M>::type>>{});
}

// f(part) for each part of message m (const or not).
template <class M, class F>
constexpr void each_part(M& m, F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(message_part<I>(m)), ...); }
  (std::make_index_sequence<std::tuple_size_v<typename message_parts<std::remove_const_t<M>>::type>>{});
}

// The bytes of message M that a microbatch of `extent` tokens uses (of each part, its used prefix).
template <class M>
constexpr std::size_t message_used_bytes(int extent) noexcept {
  return []<class... P>(std::tuple<P...>*, [[maybe_unused]] int e) {
    return (std::size_t{0} + ... + used_bytes<P>(e));
  }(static_cast<typename message_parts<M>::type*>(nullptr), extent);
}

// Copies what a microbatch of `extent` tokens uses of message `from` into `to`: a token-major
// part's used prefix (as bytes), a part of fixed size whole.
template <class M>
void copy_used(M& to, const M& from, int extent) noexcept(std::is_nothrow_copy_assignable_v<M>) {
  each_message_part(to, from, [extent](auto& t, const auto& f) {
    using P = std::remove_cvref_t<decltype(t)>;
    if constexpr (token_major<P>)
      std::memcpy(static_cast<void*>(&t), static_cast<const void*>(&f), used_bytes<P>(extent));
    else
      t = f;
  });
}

/// A message with its microbatch's extent: what a slot between two stages holds in a model with
/// token-major tensors.
template <class M>
struct carried {
  int extent = 0;
  M value{};
};

/// A packed message's header: its extent (and room that keeps the parts 8-byte aligned).
inline constexpr std::size_t packed_header = 8;
/// The most bytes a packed M takes.
template <class M>
inline constexpr std::size_t packed_capacity = packed_header + []<class... P>(std::tuple<P...>*) {
  return (std::size_t{0} + ... + sizeof(P));
}(static_cast<typename message_parts<M>::type*>(nullptr));

/// Packs `m` for a microbatch of `extent` tokens into `out` (packed_capacity<M> bytes at least);
/// returns the bytes written.
template <class M>
std::size_t pack(const M& m, int extent, std::byte* out) noexcept {
  const std::int64_t header = extent;
  std::memcpy(out, &header, packed_header);
  std::size_t at = packed_header;
  each_part(m, [&](const auto& p) {
    const std::size_t n = used_bytes<std::remove_cvref_t<decltype(p)>>(extent);
    std::memcpy(out + at, static_cast<const void*>(&p), n);
    at += n;
  });
  return at;
}

/// Unpacks `bytes` bytes at `in` into `to`; false (and `to` unchanged) where they are not a packed
/// M: a header whose extent is out of range for `capacity` tokens, or a length that does not match it.
template <class M>
bool unpack(const std::byte* in, std::size_t bytes, carried<M>& to, std::size_t capacity) noexcept {
  if (bytes < packed_header) return false;
  std::int64_t header = 0;
  std::memcpy(&header, in, packed_header);
  if (header < 1 || static_cast<std::size_t>(header) > capacity) return false;
  const int extent = static_cast<int>(header);
  if (bytes != packed_header + message_used_bytes<M>(extent)) return false;
  to.extent = extent;
  std::size_t at = packed_header;
  each_part(to.value, [&](auto& p) {
    const std::size_t n = used_bytes<std::remove_cvref_t<decltype(p)>>(extent);
    std::memcpy(static_cast<void*>(&p), in + at, n);
    at += n;
  });
  return true;
}

// Across processes (the device executors of one process per rank): every process of a replica must
// give step() the same extents, since each sizes its receives by them. Each adds, into its
// replica's part of a sum over the job, each microbatch's extent and its square; the replica's
// `ranks` processes agree exactly when every sum is `ranks` times this process's own (the extents'
// variance over the processes is then 0).
inline void put_extent_sums(std::span<const int> extents, double* part) noexcept {
  const std::size_t m = extents.size();
  for (std::size_t i = 0; i < m; ++i) {
    part[i] = extents[i];
    part[m + i] = static_cast<double>(extents[i]) * extents[i];
  }
}
// The sums (2 x microbatches per replica, every replica's) against this process's extents (of
// replica `replica`): the first of its microbatches on which the processes disagree, or -1; and
// `tokens`, the global batch's (replica d's microbatch i at d x microbatches + i).
inline int check_extent_sums(std::span<const double> sums, std::span<const int> mine, int replica, int ranks,
                             std::span<int> tokens) noexcept {
  const std::size_t m = mine.size();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::size_t d = i / m, k = i % m;
    tokens[i] = static_cast<int>(sums[2 * m * d + k] / ranks);
  }
  const double* part = sums.data() + 2 * m * static_cast<std::size_t>(replica);
  for (std::size_t i = 0; i < m; ++i) {
    const double e = mine[i];
    if (part[i] != ranks * e || part[m + i] != ranks * e * e) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace ctpipe::detail
