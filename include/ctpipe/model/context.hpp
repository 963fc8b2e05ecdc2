// What a host layer may be told about the task it runs for, and a random stream that gives the same
// numbers wherever that task runs: on any rank, thread or process, pipelined or sequential.
#pragma once

#include <array>
#include <cstdint>

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

  constexpr counter_random(key_type key, block counter) noexcept : key_(key), counter_(counter) {}

  /// Philox4x32-10 of one counter value under one key.
  static constexpr block generate(block c, key_type k) noexcept {
    for (int round = 0; round < 10; ++round) {
      if (round > 0) k = {k[0] + 0x9E3779B9u, k[1] + 0xBB67AE85u};
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
      c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
    }
    return c;
  }

  /// The next 32 random bits.
  constexpr std::uint32_t next() noexcept {
    if (used_ == 4) {
      block_ = generate(counter_, key_);
      ++counter_[0];
      used_ = 0;
    }
    return block_[used_++];
  }
  /// A float uniform in [0, 1), from 24 random bits (every value a multiple of 2^-24).
  constexpr float uniform() noexcept { return static_cast<float>(next() >> 8) * (1.0f / 16777216.0f); }

 private:
  key_type key_;
  block counter_;
  block block_{};
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
/// sequential_step, rank and stage are 0 and op is the call's (forward or backward).
struct context {
  int rank = 0, stage = 0;
  int layer = 0;       // the layer's index in the model
  int microbatch = 0;  // in the step's global batch: replica r's microbatch i is r * microbatches + i
  op_kind op = op_kind::forward;
  std::uint64_t step = 0;  // the steps the executor ran before this one (sequential_step: its `step`)

  /// A random stream of this (step, microbatch, layer), and `stream` (a layer's own choice: a seed,
  /// or one stream per use): the same numbers for the forward, the backward and a recomputed
  /// forward of one microbatch, whatever rank, stage or op runs them (the op is not part of it).
  constexpr counter_random random(std::uint32_t stream = 0) const noexcept {
    return counter_random({static_cast<std::uint32_t>(layer), stream},
                          {0u, static_cast<std::uint32_t>(microbatch), static_cast<std::uint32_t>(step),
                           static_cast<std::uint32_t>(step >> 32)});
  }
};

}  // namespace ctpipe
