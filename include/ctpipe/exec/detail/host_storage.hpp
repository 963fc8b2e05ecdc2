// What each stage of the shared host compute (exec/detail/host_compute.hpp) holds: a chain's
// stage, a graph model's stage, and a stage another process runs; each cache-line aligned.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include <ctpipe/detail/index.hpp>  // ix

namespace ctpipe::detail {

inline constexpr std::size_t cache_line = 64;

struct aborted {};  // unwinds a rank's program when the step has failed (here or elsewhere)

template <class T>
struct alignas(cache_line) padded {
  T value{};
};
// An array that starts a cache line of its own.
template <class T, std::size_t N>
struct alignas(cache_line) line_array : std::array<T, N> {};

// A stage's storage. The stash holds, per live microbatch, every tensor of the stage's forward
// pass (or only its input when the stage recomputes); `work` (recomputing stages only) holds the
// recomputed forward and `grads` the gradients of the backward pass. With split backward (Split),
// `grad_stash` keeps, per live microbatch, the gradients an I computed (each layer's output
// gradient) until its W; it shares the stash's slots (a slot lives from F to W).
// Where the stage's layers keep state for their backward (Keeps: some layer has a saved_type),
// `saved` holds it per live microbatch in the stash's slots, from the F that writes it to the last
// backward op that reads it. A recomputing stage keeps none from its F: each B, I or W recomputes
// it into `work_saved`; with split backward, the I's recomputed state (and what its backward_input
// added) stays in `saved` for its W, whose own recomputation writes only `work_saved`.
struct no_work {};
// Cache-line aligned: stages on different ranks must not share a line (the engine holds them side
// by side, and small tensors would otherwise ping-pong between cores on every write).
template <class Full, class Input, class Saved, bool Keeps, bool Recompute, bool Split, int Slots>
struct alignas(cache_line) stage_storage {
  using stash_type = std::conditional_t<Recompute, Input, Full>;
  static constexpr bool per_slot = Keeps && (!Recompute || Split);
  std::array<stash_type, detail::ix(Slots)> stash{};
  [[no_unique_address]] std::array<Saved, per_slot ? detail::ix(Slots) : 0> saved{};   // no bytes without state
  [[no_unique_address]] std::array<Full, Split ? detail::ix(Slots) : 0> grad_stash{};  // no bytes without split
  [[no_unique_address]] std::conditional_t<Recompute, Full, no_work> work{};
  [[no_unique_address]] std::conditional_t<Recompute && Keeps, Saved, no_work> work_saved{};
  Full grads{};
};
// The storage of a stage another process runs (see compute's Only).
struct absent_stage {};

// A stage of a model that is not a chain (exec/detail/graph_stages.hpp). The stash holds, per live
// microbatch, each layer's gathered input and its output (Act), or, for a recomputing stage, what
// the stage took in (Inbox: the messages of earlier stages). Grads: each layer's output gradient
// (per slot from I to W with split backward); dxs: each layer's input gradient, before it is
// summed into its sources'; sendbox: the messages for later stages, made by the F; outbox: the
// gradient terms for earlier stages, made by the B or I.
template <class Act, class Inbox, class Sendbox, class Outbox, class Grads, class Dxs, class Saved, bool Keeps,
          bool Recompute, bool Split, int Slots>
struct alignas(cache_line) graph_stage_storage {
  using stash_type = std::conditional_t<Recompute, Inbox, Act>;
  static constexpr bool per_slot = Keeps && (!Recompute || Split);
  std::array<stash_type, detail::ix(Slots)> stash{};
  [[no_unique_address]] std::array<Saved, per_slot ? detail::ix(Slots) : 0> saved{};
  [[no_unique_address]] std::array<Grads, Split ? detail::ix(Slots) : 0> grad_stash{};
  [[no_unique_address]] std::conditional_t<Recompute, Act, no_work> work{};
  [[no_unique_address]] std::conditional_t<Recompute && Keeps, Saved, no_work> work_saved{};
  [[no_unique_address]] std::conditional_t<Recompute, no_work, Inbox> inbox{};
  Grads grads{};
  Dxs dxs{};
  Sendbox sendbox{};
  Outbox outbox{};
};

}  // namespace ctpipe::detail
