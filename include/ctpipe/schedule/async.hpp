// PipeDream's asynchronous pipelines: 1F1B with no flush between steps, and the weight versions
// that make it correct. Two rules (docs/schedules.md):
//
//   weight_versions::stashed (PipeDream): one optimizer update per microbatch on every stage. Stage
//     s keeps its last p - s versions; F(i) and B(i) of stage s both use version max(0, i - (p-1-s))
//     (versions counted as updates applied on that stage). Staleness: p-1-s updates; p = 1 is SGD.
//   weight_versions::double_buffered (PipeDream-2BW): gradients summed over the m microbatches of a
//     step (a minibatch); one update per step. Every F and B of minibatch k (from 0) uses version
//     max(0, k - 1), that is W(t+1) = W(t) - lr * grad f(W(t-1)) (with minibatches counted from 1,
//     as in docs/schedules.md: W^(max(0, k-2))). Exactly two versions live on every stage.
//
// The order is 1F1B on one stage per rank, continued across steps: stage s runs w = p-1-s warm-up
// forwards once, then (F, B) pairs forever; the cool-down backwards run once, when training stops.
// As a schedule_generator, pipedream(p, m) is the table of two steps from a fresh start and the
// cool-down (1F1B over 2m microbatches): that table is verified and measured like any other, and
// the executor cuts it into the first step, the steady step that repeats, and the drain.
// Plain constexpr: no threads, no Hana.
#pragma once

#include <ctpipe/schedule/classic.hpp>
#include <ctpipe/schedule/schedule.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe {

/// How an asynchronous pipeline keeps its weights (see the top of this header).
enum class weight_versions : int {
  stashed,          // PipeDream: an update per microbatch, p - s versions on stage s
  double_buffered,  // PipeDream-2BW: an update per step of m microbatches, two versions
};

/// PipeDream's asynchronous 1F1B (no flush): `ranks` stages on `ranks` ranks, `microbatches` per
/// step, weights kept by `versions`. Microbatches are counted from the pipeline's start (a fresh
/// start, or the step after a drain): step k holds microbatches k*m .. k*m + m - 1.
struct async_schedule {
  int ranks = 1, microbatches = 1;
  weight_versions versions = weight_versions::stashed;
  CTPIPE_SCHEDULE_ERRORS("ctpipe::pipedream")

  /// Steps in the table make_table<> builds: the first and one steady step, then the drain.
  static constexpr int window_steps = 2;

  constexpr schedule_info info() const {
    return {versions == weight_versions::stashed ? schedule_name("pipedream") : schedule_name("pipedream_2bw"), ranks,
            window_steps * microbatches, 1, 0};
  }
  constexpr int rank_of(int stage) const { return detail::loop_rank_of(ranks, stage); }
  constexpr int stages() const { return ranks; }
  constexpr param_check validate() const {
    // Each step must hold stage 0's warm-up, so that only the first step lacks backwards (and with
    // 2BW, so that minibatch k+2 never starts before minibatch k's update).
    if (microbatches < ranks - 1) return {param_rule::microbatches_cover_warmup, microbatches};
    return {};
  }
  template <class Sink>
  constexpr void emit(Sink& out) const {
    for (int r = 0; r < ranks; ++r) detail::emit_one_f_one_b(ranks, window_steps * microbatches, r, out);
  }

  // ---- the weight rule -------------------------------------------------------------------------
  /// Forwards stage s runs before its first backward: p - 1 - s.
  constexpr int warmup(int stage) const { return ranks - 1 - stage; }
  /// Weight versions stage s keeps: p - s (stashed) or 2 (double buffered). Allocated once.
  constexpr int version_slots(int stage) const { return versions == weight_versions::stashed ? ranks - stage : 2; }
  /// Activation stashes stage s keeps: p - s (its warm-up forwards and the one in hand).
  constexpr int stash_slots(int stage) const { return ranks - stage; }
  /// Updates stage s has applied when microbatch i's forward (and its backward) run, before the
  /// clamp at 0: the version they use is max(0, raw_version). Negative versions are copies of
  /// version 0, so that every version has a slot of its own: slot = raw_version mod version_slots.
  constexpr int raw_version(int stage, int microbatch) const {
    return versions == weight_versions::stashed ? microbatch - warmup(stage) : microbatch / microbatches - 1;
  }
  /// The weight version F(i) and B(i) of stage s use: max(0, i - (p-1-s)), or max(0, k - 1) for
  /// microbatch i of minibatch k = i / m.
  constexpr int version(int stage, int microbatch) const {
    const int v = raw_version(stage, microbatch);
    return v > 0 ? v : 0;
  }
  /// The slot that holds version v (v may be negative: see raw_version).
  constexpr int slot_of(int stage, int v) const {
    const int n = version_slots(stage);
    return ((v % n) + n) % n;
  }
  /// The slot F(i) and B(i) of stage s use.
  constexpr int version_slot(int stage, int microbatch) const { return slot_of(stage, raw_version(stage, microbatch)); }
  /// Whether stage s applies an update right after B(i): after every B (stashed), after the last
  /// microbatch of each step (double buffered).
  constexpr bool update_after(int microbatch) const {
    return versions == weight_versions::stashed || (microbatch + 1) % microbatches == 0;
  }
  /// The version the update after B(i) makes: newest + 1. It is written into that version's slot,
  /// which holds the version B(i) used and the gradients B(i) (or the step's backwards) summed.
  constexpr int updated_version(int microbatch) const {
    return versions == weight_versions::stashed ? microbatch + 1 : microbatch / microbatches + 1;
  }
  /// Updates stage s has applied after `microbatches_run` microbatches and the drain.
  constexpr int versions_after(int microbatches_run) const {
    return versions == weight_versions::stashed ? microbatches_run : microbatches_run / microbatches;
  }
  /// How many updates behind the newest the weights a microbatch's gradient was computed with are,
  /// in steady state: p-1-s (stashed), 1 (double buffered).
  constexpr int staleness(int stage) const { return versions == weight_versions::stashed ? warmup(stage) : 1; }

  friend constexpr bool operator==(const async_schedule&, const async_schedule&) = default;
};

/// PipeDream with weight stashing: asynchronous 1F1B, an update per microbatch.
constexpr async_schedule pipedream(int ranks, int microbatches) {
  return {ranks, microbatches, weight_versions::stashed};
}
/// PipeDream-2BW: asynchronous 1F1B, two weight versions, an update per step of m microbatches.
constexpr async_schedule pipedream_2bw(int ranks, int microbatches) {
  return {ranks, microbatches, weight_versions::double_buffered};
}

}  // namespace ctpipe
