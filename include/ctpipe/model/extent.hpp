// Tensors with a run-time extent: a compile-time capacity of tokens, of which each microbatch uses
// its own number (its extent). Such a tensor is token-major: it declares
//
//   static constexpr std::size_t max_tokens = N;
//
// and its first e tokens are its first e x (bytes / N) bytes (a host tensor: its sizeof; a device
// view: its `bytes`). The executors then move only the used bytes of it, and tell every layer the
// microbatch's extent (ctpipe::context::extent). A model whose tensors are all of fixed size works
// as it always has.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <ctpipe/model/graph.hpp>  // detail::tensor_bytes

namespace ctpipe {

/// A tensor whose leading dimension is tokens, up to T::max_tokens of them (see above).
template <class T>
concept token_major = requires {
  { T::max_tokens } -> std::convertible_to<std::size_t>;
  typename std::integral_constant<std::size_t, T::max_tokens>;  // readable in a constant expression
};

/// The tokens T holds at most: T::max_tokens, or 0 for a tensor of fixed size.
template <class T>
inline constexpr std::size_t max_tokens_v = 0;
template <token_major T>
inline constexpr std::size_t max_tokens_v<T> = static_cast<std::size_t>(T::max_tokens);

/// The bytes of one token of a token-major T.
template <token_major T>
inline constexpr std::size_t token_bytes_v = detail::tensor_bytes<T>() / max_tokens_v<T>;

/// The bytes of T that a microbatch of `extent` tokens uses: extent tokens of a token-major
/// tensor, all of a tensor of fixed size.
template <class T>
constexpr std::size_t used_bytes(int extent) noexcept {
  if constexpr (token_major<T>)
    return static_cast<std::size_t>(extent) * token_bytes_v<T>;
  else
    return detail::tensor_bytes<T>();
}

/// What a step with extents returns: each microbatch's loss, and the tokens it covered (its extent).
struct token_losses {
  std::span<const double> losses;
  std::span<const int> tokens;

  /// The step's tokens.
  constexpr long long total_tokens() const noexcept {
    long long n = 0;
    for (int t : tokens) n += t;
    return n;
  }
  /// The loss per token: the sum of the losses over the step's tokens (for a loss that sums over
  /// its microbatch's tokens, as layers::softmax_cross_entropy<..., rows::tokens> does; its
  /// gradients are then the sum's, and a per-token step scales them by 1 / total_tokens()).
  constexpr double per_token() const noexcept {
    double sum = 0.0;
    for (double l : losses) sum += l;
    const long long n = total_tokens();
    return n > 0 ? sum / static_cast<double>(n) : 0.0;
  }
};

namespace detail {

// The bytes of one token of T, 0 for a tensor of fixed size.
template <class T>
constexpr std::size_t token_bytes_of() noexcept {
  if constexpr (token_major<T>)
    return max_tokens_v<T> > 0 ? tensor_bytes<T>() / max_tokens_v<T> : 0;
  else
    return 0;
}

// The rule a token-major tensor keeps, as one value: 0 when it keeps it, else which part it breaks
// (model.hpp says it in words).
enum class token_layout { ok, zero_capacity, not_divisible, not_trivially_copyable };
template <class T>
constexpr token_layout token_layout_of() {
  if constexpr (!token_major<T>)
    return token_layout::ok;
  else if constexpr (max_tokens_v<T> == 0)
    return token_layout::zero_capacity;
  else if constexpr (tensor_bytes<T>() % max_tokens_v<T> != 0)
    return token_layout::not_divisible;
  else if constexpr (!requires { T::bytes; } && !std::is_trivially_copyable_v<T>)
    return token_layout::not_trivially_copyable;  // a host tensor is copied a prefix of bytes at a time
  else
    return token_layout::ok;
}

// A step's extents, one per microbatch (none: every microbatch uses all `capacity` tokens), checked
// for `who`: one per input, each 1 to capacity, and none for a model of fixed shapes.
inline void check_extents(const char* who, std::span<const int> extents, std::size_t microbatches,
                          std::size_t capacity) {
  if (extents.empty()) return;
  if (capacity == 0)
    throw std::invalid_argument(std::string(who) +
                                ": extents given, but no tensor of the model is token-major (declares max_tokens)");
  if (extents.size() != microbatches)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(extents.size()) + " extents for " +
                                std::to_string(microbatches) + " microbatches (give one per microbatch)");
  for (std::size_t i = 0; i < extents.size(); ++i)
    if (extents[i] < 1 || static_cast<std::size_t>(extents[i]) > capacity)
      throw std::invalid_argument(std::string(who) + ": microbatch " + std::to_string(i) + " has extent " +
                                  std::to_string(extents[i]) + "; an extent is 1 to the model's token capacity (" +
                                  std::to_string(capacity) + ")");
}
// Microbatch i's extent: extents[i], or all `capacity` tokens where no extents were given.
inline int extent_of(const int* extents, int i, std::size_t capacity) noexcept {
  return extents != nullptr ? extents[i] : static_cast<int>(capacity);
}

}  // namespace detail

}  // namespace ctpipe
