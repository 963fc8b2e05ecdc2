// What every process of an MPI job must agree on, as one number: the table's programs (skip messages
// included), the stages' layers and recomputation, and the size of what crosses each boundary. Each process computes it
// at compile time; the session compares them at construction, so that processes built from different tables, models or
// partitions are refused instead of exchanging wrong messages.
#pragma once

#include <cstdint>

#include <ctpipe/config.hpp>        // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::mpi::detail {

// FNV-1a over what every process must agree on.
struct fingerprint {
  std::uint64_t h = 14695981039346656037ull;
  constexpr void add(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
};

// The fingerprint of execution plan ExecPlan with stage plan Stages: the table's programs, the stages'
// layers and recomputation, and `bytes(b)` of each boundary tensor b.
template <auto ExecPlan, auto Stages, class Bytes>
constexpr std::uint64_t fingerprint_of(Bytes bytes) {
  constexpr int ranks = static_cast<int>(CTPIPE_NTTP_TYPE(ExecPlan.table)::static_ranks);
  constexpr int stage_count = static_cast<int>(CTPIPE_NTTP_TYPE(ExecPlan.table)::static_stages);
  static_assert(Stages.stages() == ExecPlan.chain_length);
  fingerprint f;
  f.add(static_cast<std::uint64_t>(ranks));
  f.add(static_cast<std::uint64_t>(stage_count));
  f.add(static_cast<std::uint64_t>(ExecPlan.table.microbatches()));
  for (int r = 0; r < ranks; ++r)
    for (const task& t : ExecPlan.table.program(r)) {
      f.add(static_cast<std::uint64_t>(t.op));
      f.add(static_cast<std::uint64_t>(t.stage));
      f.add(static_cast<std::uint64_t>(t.microbatch));
      f.add(static_cast<std::uint64_t>(t.other + 1));  // a skip message's far stage
    }
  // (The stage plan's stages: one chain's, the model's; a bidirectional table runs them twice.)
  constexpr int model_stages = ExecPlan.chain_length;
  for (int s = 0; s <= model_stages; ++s) f.add(static_cast<std::uint64_t>(Stages.first[ctpipe::detail::ix(s)]));
  for (int s = 0; s < model_stages; ++s) f.add(Stages.recompute[ctpipe::detail::ix(s)] ? 1 : 0);
  for (int b = 0; b + 1 < model_stages; ++b) f.add(bytes(b));
  return f.h;
}

}  // namespace ctpipe::mpi::detail
