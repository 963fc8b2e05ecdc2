// How the CUDA executors launch a step (eagerly, or replayed from a graph), and the longest step
// dispatch::automatic unrolls.
#pragma once

#include <cstdint>

namespace ctpipe::cuda {

/// dispatch::automatic unrolls a step of at most this many tasks, and walks a longer one. Lower
/// than the host executor's: each task here makes CUDA calls of a microsecond or more, against
/// which the walk's extra nanosecond is nothing, while unrolling costs compile time superlinearly
/// (figures: bench/README.md, "CUDA executor without a GPU").
inline constexpr int automatic_unroll_limit = 256;

/// How a step is launched: every call issued anew, or replayed from a CUDA graph captured at the
/// first graph step (and again whenever the step's inputs or targets point elsewhere).
enum class launch : std::uint8_t { eager, graph };

}  // namespace ctpipe::cuda
