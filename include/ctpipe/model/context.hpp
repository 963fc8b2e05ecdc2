// What a host layer may be told about the task it runs for, and a random stream that gives the same
// numbers wherever that task runs: on any rank, thread or process, pipelined or sequential.
#pragma once

#include <array>
#include <cstdint>

#include <ctpipe/config.hpp>         // CTPIPE_HOST_DEVICE
#include <ctpipe/schedule/task.hpp>  // op_kind

namespace ctpipe {

/// A counter-based random stream: Philox4x32 with 10 rounds (Salmon, Moraes, Dror and Shaw, "Parallel
/// random numbers: as easy as 1, 2, 3", SC 2011). Its numbers are a pure function of the key and
/// the counter, so two runs that name the same (key, counter) draw the same numbers in any order,
/// on any thread. Each block of four 32-bit numbers comes from one counter value; the stream walks
/// the counter's first word.
class counter_random {
 public:
  using block = std::array<std::uint32_t, 4>;
  using key_type = std::array<std::uint32_t, 2>;

  constexpr counter_random(key_type key, block counter) noexcept
      : counter_random(key[0], key[1], counter[0], counter[1], counter[2], counter[3]) {}
  /// The same, word by word (usable in device code, where std::array is not).
  CTPIPE_HOST_DEVICE constexpr counter_random(std::uint32_t k0, std::uint32_t k1, std::uint32_t c0, std::uint32_t c1,
                                              std::uint32_t c2, std::uint32_t c3) noexcept
      : key_{k0, k1}, counter_{c0, c1, c2, c3}, first_(c0) {}

  /// The stream of a layer's task: keyed by (layer, stream_id), counting from (0, microbatch, step's
  /// low word, step's high word). ctpipe::context::random and ctpipe::cuda::context::random both
  /// draw from it, so a host layer and a device layer of the same task draw the same numbers.
  CTPIPE_HOST_DEVICE static constexpr counter_random of(int layer, int microbatch, std::uint64_t step,
                                                        std::uint32_t stream_id) noexcept {
    return counter_random(static_cast<std::uint32_t>(layer), stream_id, 0u, static_cast<std::uint32_t>(microbatch),
                          static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32));
  }

  /// Philox4x32-10 of one counter value under one key.
  static constexpr block generate(block c, key_type k) noexcept {
    std::uint32_t x[4] = {c[0], c[1], c[2], c[3]};
    philox(x, k[0], k[1]);
    return {x[0], x[1], x[2], x[3]};
  }

  /// The next 32 random bits.
  CTPIPE_HOST_DEVICE constexpr std::uint32_t next() noexcept {
    if (used_ == 4) {
      for (int i = 0; i < 4; ++i) block_[i] = counter_[i];
      philox(block_, key_[0], key_[1]);
      ++counter_[0];
      used_ = 0;
    }
    return block_[used_++];
  }
  /// A float uniform in [0, 1), from 24 random bits (every value a multiple of 2^-24).
  CTPIPE_HOST_DEVICE constexpr float uniform() noexcept { return to_uniform(next()); }

  /// The stream's number `i` (counting from its start, whatever next() has drawn): what the i-th
  /// call of next() on a fresh stream returns. For a kernel whose threads each draw their own
  /// element: thread i draws what a loop's i-th draw would.
  CTPIPE_HOST_DEVICE constexpr std::uint32_t at(std::uint64_t i) const noexcept {
    std::uint32_t c[4] = {first_ + static_cast<std::uint32_t>(i / 4), counter_[1], counter_[2], counter_[3]};
    philox(c, key_[0], key_[1]);
    return c[i % 4];
  }
  /// The float uniform() makes of 32 random bits.
  CTPIPE_HOST_DEVICE static constexpr float to_uniform(std::uint32_t bits) noexcept {
    return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
  }

 private:
  // Ten rounds of Philox4x32 on c, in place, under key (k0, k1).
  CTPIPE_HOST_DEVICE static constexpr void philox(std::uint32_t (&c)[4], std::uint32_t k0, std::uint32_t k1) noexcept {
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, n1 = static_cast<std::uint32_t>(p1),
                          n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, n3 = static_cast<std::uint32_t>(p0);
      c[0] = n0;
      c[1] = n1;
      c[2] = n2;
      c[3] = n3;
    }
  }

  std::uint32_t key_[2] = {};
  std::uint32_t counter_[4] = {};
  std::uint32_t block_[4] = {};
  std::uint32_t first_ = 0;  // the counter's first word at the stream's start (for at())
  int used_ = 4;
};

/// Where a step stands for its layers' context: its number, and the index its microbatch 0 has in
/// the global batch (replica r of data parallelism, m microbatches each: r * m).
struct step_origin {
  std::uint64_t step = 0;
  int first_microbatch = 0;
};

/// What a host layer's forward, backward, backward_input and backward_weight may take as their
/// first argument (`const ctpipe::context&`): the task they run for. Plain data. In
/// sequential_step, rank and stage are 0 and op is the call's (forward or backward). A loss may
/// take it too: then `layer` is the model's size (one past its last layer) and op the task's.
struct context {
  int rank = 0, stage = 0;
  int layer = 0;       // the layer's index in the model
  int microbatch = 0;  // in the step's global batch: replica r's microbatch i is r * microbatches + i
  op_kind op = op_kind::forward;
  std::uint64_t step = 0;  // the steps the executor ran before this one (sequential_step: its `step`)
  /// The tokens this microbatch uses (1 to the model's token_capacity) where the model has
  /// token-major tensors (ctpipe/model/extent.hpp): a layer reads and writes only those. 0 where
  /// every tensor of the model has a fixed size.
  int extent = 0;
  /// false in a forward-only pass (an executor's evaluate() or predict(), sequential_evaluate):
  /// a layer that acts differently at inference (dropout) acts so there.
  bool training = true;

  /// A random stream of this (step, microbatch, layer), and `stream` (a layer's own choice: a seed,
  /// or one stream per use): the same numbers for the forward, the backward and a recomputed
  /// forward of one microbatch, whatever rank, stage or op runs them (the op is not part of it).
  constexpr counter_random random(std::uint32_t stream = 0) const noexcept {
    return counter_random::of(layer, microbatch, step, stream);
  }
};

}  // namespace ctpipe
