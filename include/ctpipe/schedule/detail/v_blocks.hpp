// The construction of the controllable-memory V schedules (Qi et al., "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024), as its authors' scheduler orders them:
//
//  1. a building block repeats every 6 time slots: on rank r, F of chunk 0 (stage r), F of chunk 1
//     (stage 2p-1-r), I of chunk 1 and I of chunk 0 sit at fixed offsets of the block (its shape
//     decides the peak memory: the block's lifespan over its interval);
//  2. every W goes to the first free slot after its I (one list, the oldest I first);
//  3. squeeze: the ops of the warm-up (before rank 0's first chunk-0 I) and of the cool-down (after
//     rank 0's last chunk-0 F) move, one at a time in slot order, to the earliest free slot their
//     dependencies allow that does not raise the schedule's peak memory; then every op starts as
//     early as it can at unit cost;
//  4. the W are dropped and the cool-down squeezed once more, with each W counted in the first free
//     slot after its I; then again every op starts as early as it can;
//  5. the W return, one list per chunk, into the free slots (chunk 1's W first), and each rank's
//     order is its ops in slot order.
//
// Everything is a plain loop over small integer arrays, the same at compile time and at run time.
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/detail/order.hpp>
#include <ctpipe/schedule/task.hpp>

namespace ctpipe::detail {

/// The building blocks: V-Min (about a third of 1F1B's activations) and V-Half (a half).
enum class v_block : int { min, half };

// The kinds of op a V block repeats, in the block's order, then the W (in steps 2-4 one list of
// every W on the rank, in step 5 one list per chunk).
inline constexpr int v_f0 = 0, v_f1 = 1, v_i1 = 2, v_i0 = 3, v_w = 4, v_w1 = 4, v_w0 = 5;

/// Rank r's offsets of F0, F1, I1, I0 within the repeating block (period 6 a microbatch).
struct v_offsets {
  int at[4]{};
};
constexpr v_offsets v_block_offsets(v_block b, int p, int r) {
  if (b == v_block::min) {
    const int gap = p % 3 == 0 ? 2 : 0;
    return {{r, 2 * p - 1 - r, 2 * p + gap + r, 4 * p + gap - 1 - r}};
  }
  const int gap = p % 2 == 0 ? 3 : 0;
  return {{2 * r, 3 * p - 2 - r, 3 * p + gap + 2 * r - 1, 6 * p + gap - r - 2}};
}

/// The times of every op of a V schedule under construction: `time(r, kind, j)` for the four block
/// kinds (j < m) and the W kinds (j < 2m in the single list, j < m in each chunk's list); `at(r, t)`
/// the op a rank runs at time t (kind * width + j, or -1).
class v_slots {
 public:
  constexpr v_slots(int p, int m, int horizon)
      : p_(p),
        m_(m),
        horizon_(horizon),
        time_(static_cast<std::size_t>(p) * 6 * m, -1),
        at_(static_cast<std::size_t>(p) * horizon, -1),
        ops_(static_cast<std::size_t>(p)) {}

  constexpr int ranks() const { return p_; }
  constexpr int microbatches() const { return m_; }
  constexpr int horizon() const { return horizon_; }
  constexpr int& time(int r, int kind, int j) { return time_.data()[entry(r, kind, j)]; }
  constexpr int time(int r, int kind, int j) const { return time_.data()[entry(r, kind, j)]; }
  /// Where op (kind, j) of rank r is kept among `entries()`: kinds 0..3 and the chunks' W lists
  /// (4, 5) take m entries each; the single W list takes 2m from kind 4's start.
  constexpr std::size_t entry(int r, int kind, int j) const {
    return (static_cast<std::size_t>(r) * 6 + static_cast<std::size_t>(kind)) * static_cast<std::size_t>(m_) +
           static_cast<std::size_t>(j);
  }
  constexpr std::size_t entries() const { return time_.size(); }
  /// Moves every op to the time `times` gives it (indexed like entry()): each rank's ops keep
  /// their order and only move earlier, so the timeline is rewritten in place, the earliest first.
  constexpr void retime(const int* times) {
    for (int r = 0; r < p_; ++r) {
      int* line = at_.data() + static_cast<std::size_t>(r) * horizon_;
      for (int t = 0; t < horizon_; ++t)
        if (const int code = line[t]; code >= 0) {
          const std::size_t e = entry(r, kind_of(code), index_of(code));
          time_.data()[e] = times[e];
          line[t] = -1;
          line[times[e]] = code;
        }
    }
  }
  constexpr int at(int r, int t) const { return at_.data()[static_cast<std::size_t>(r) * horizon_ + t]; }
  /// Rank r's timeline (its op at each time, or -1) and how many ops it holds.
  constexpr const int* timeline(int r) const { return at_.data() + static_cast<std::size_t>(r) * horizon_; }
  constexpr int ops(int r) const { return ops_.data()[r]; }
  static constexpr int kind_of(int code) { return code / code_width; }
  static constexpr int index_of(int code) { return code % code_width; }

  /// Places op (kind, j) of rank r at time t (its old time freed).
  constexpr void place(int r, int kind, int j, int t) {
    int& now = time(r, kind, j);
    int* line = at_.data() + static_cast<std::size_t>(r) * horizon_;
    if (now >= 0) {
      line[now] = -1;
      --ops_.data()[r];
    }
    now = t;
    if (t >= 0) {
      line[t] = kind * code_width + j;
      ++ops_.data()[r];
    }
  }
  /// Removes every W of every rank.
  constexpr void drop_weights() {
    for (int r = 0; r < p_; ++r)
      for (int kind = v_w; kind <= v_w0; ++kind)
        for (int j = 0; j < 2 * m_; ++j)
          if (kind == v_w || j < m_) place(r, kind, j, -1);
  }
  /// The last time rank r runs anything.
  constexpr int last(int r) const {
    for (int t = horizon_ - 1; t >= 0; --t)
      if (at(r, t) >= 0) return t;
    return -1;
  }

 private:
  static constexpr int code_width = 1 << 20;
  int p_, m_, horizon_;
  buffer<int> time_;
  buffer<int> at_;
  buffer<int> ops_;
};

/// Step 2 and 5: the W of rank r into its free slots after their I, the oldest first; with one
/// list per chunk, chunk 1's first; those left over after the rank's last op, one a slot.
constexpr void v_place_weights(v_slots& s, int r, bool per_chunk) {
  const int bound = s.last(r);
  int pending[2]{}, placed[2]{};
  auto put = [&](int list, int t) {
    const int kind = per_chunk ? v_w1 + list : v_w;
    s.place(r, kind, placed[list]++, t);
    --pending[list];
  };
  const int* line = s.timeline(r);
  int t = 0;
  for (; t <= bound; ++t) {
    const int code = line[t];
    if (code >= 0) {
      const int kind = v_slots::kind_of(code);
      if (kind == v_i1 || kind == v_i0) ++pending[per_chunk && kind == v_i0 ? 1 : 0];
    } else if (pending[0] > 0) {
      put(0, t);
    } else if (pending[1] > 0) {
      put(1, t);
    }
  }
  for (int list = 0; list < 2; ++list)
    while (pending[list] > 0) put(list, t++);
}

/// Where a scan of a rank's timeline stands: activations held, I whose W is still to come (when
/// the W are not placed, each takes the first free slot after its I), the peak so far.
struct v_memory_state {
  int live = 0, pending = 0, peak = 0;
};

/// Rank r's memory over slots [from, to) from `state` (to < 0: to its last op; past it memory
/// only falls): +1 at each F, -1 at each W placed or, with the W not placed, counted.
constexpr v_memory_state v_scan(const v_slots& s, int r, bool weights_placed, v_memory_state state, int from, int to,
                                int seen_before) {
  const int* line = s.timeline(r);
  const int ops = s.ops(r);
  for (int t = from, seen = seen_before; to < 0 ? seen < ops : t < to; ++t) {
    const int code = line[t];
    if (code >= 0) {
      ++seen;
      const int kind = v_slots::kind_of(code);
      state.live += (kind == v_f0 || kind == v_f1) - (kind >= v_w);
      state.pending += kind == v_i1 || kind == v_i0;
    } else if (!weights_placed && state.pending > 0) {
      --state.live;
      --state.pending;
    }
    state.peak = state.live > state.peak ? state.live : state.peak;
  }
  return state;
}

/// Rank r's peak activations, in stage-microbatches.
constexpr int v_peak(const v_slots& s, int r, bool weights_placed) {
  return v_scan(s, r, weights_placed, {}, 0, -1, 0).peak;
}

/// The earliest time op (kind, j) of rank r may take: after what it depends on (the same kind one
/// rank up the V for F0 and I1, one rank down for F1 and I0; the previous kind of the block on the
/// same rank; the same kind's previous microbatch; for the single list's j-th W, the rank's j-th I,
/// `nth_input`).
constexpr int v_earliest(const v_slots& s, int r, int kind, int j, int nth_input) {
  const int p = s.ranks();
  int after = kind == v_w ? nth_input : -1;
  auto at_least = [&](int t) { after = t > after ? t : after; };
  if ((kind == v_f0 || kind == v_i1) && r > 0) at_least(s.time(r - 1, kind, j));
  if ((kind == v_f1 || kind == v_i0) && r + 1 < p) at_least(s.time(r + 1, kind, j));
  if (kind > v_f0 && kind < v_w) at_least(s.time(r, kind - 1, j));
  if (j > 0) at_least(s.time(r, kind, j - 1));
  return after + 1;
}

/// Steps 3 and 4: moves ops earlier in slot order without raising the peak. With the W placed,
/// the warm-up and the cool-down move; without, the cool-down alone. Ops are visited in the order
/// of their times before the pass; an op moves only into a free slot before its own, so when op
/// (t, r) is visited it is still at t, every op its rank ran earlier has been visited (and any slot
/// of the rank before t that holds an op is final), and what the rank holds before t is known
/// (`held`), as are the times of its I so far (`inputs`, in time order; a j-th W waits for the j-th).
constexpr void v_squeeze(v_slots& s, bool weights_placed) {
  const int p = s.ranks(), m = s.microbatches(), h = s.horizon();
  buffer<int> above_buffer(static_cast<std::size_t>(h)), held_buffer(static_cast<std::size_t>(p));
  buffer<int> inputs_buffer(static_cast<std::size_t>(p) * 2 * m), input_count_buffer(static_cast<std::size_t>(p));
  int *above = above_buffer.data(), *held = held_buffer.data();
  int *inputs = inputs_buffer.data(), *input_count = input_count_buffer.data();
  int cap = 0;
  for (int r = 0; r < p; ++r) {
    const int peak = v_peak(s, r, weights_placed);
    cap = peak > cap ? peak : cap;
  }
  int phase = 0;  // 0 warm-up, 1 steady (fixed), 2 cool-down
  for (int t = 0; t < h; ++t)
    for (int r = 0; r < p; ++r) {
      const int* line = s.timeline(r);
      const int code = line[t];
      if (code < 0) continue;
      const int kind = v_slots::kind_of(code), j = v_slots::index_of(code);
      const bool forward = kind == v_f0 || kind == v_f1, input = kind == v_i1 || kind == v_i0;
      int* rank_inputs = inputs + static_cast<std::size_t>(r) * 2 * m;
      if (kind == v_i0 && r == 0 && phase == 0) phase = 1;
      const bool fixed = phase == 1 || (phase == 0 && !weights_placed);
      if (phase == 1 && kind == v_f0 && j == m - 1) phase = 2;
      if (!fixed) {
        const int earliest = v_earliest(s, r, kind, j, kind == v_w ? rank_inputs[j] : -1);
        // With the W placed, only an F can raise the peak, by one over the slots it moves across:
        // above[u] is the most held over slots u .. t-1, found backwards from what is held at t.
        if (weights_placed && forward && earliest < t) {
          int live = held[r];
          for (int x = t - 1; x >= earliest; --x) {
            above[x] = x + 1 < t && above[x + 1] > live ? above[x + 1] : live;
            const int k = line[x] < 0 ? -1 : v_slots::kind_of(line[x]);
            live -= (k == v_f0 || k == v_f1) - (k >= v_w);
          }
        }
        // Without, the memory before `earliest` is the same for every candidate.
        const v_memory_state prefix =
            weights_placed || earliest >= t ? v_memory_state{} : v_scan(s, r, false, {}, 0, earliest, 0);
        int seen_before = 0;
        if (!weights_placed && earliest < t)
          for (int x = 0; x < earliest; ++x) seen_before += line[x] >= 0;
        bool moved = false;
        for (int u = earliest; u < t && !moved; ++u) {
          if (line[u] >= 0) continue;
          s.place(r, kind, j, u);
          if (weights_placed)
            moved = !forward || above[u] + 1 <= cap;
          else
            moved = v_scan(s, r, false, prefix, earliest, -1, seen_before).peak <= cap;
          if (!moved) s.place(r, kind, j, t);
        }
      }
      const int now = s.time(r, kind, j);
      held[r] += forward - (kind >= v_w);
      if (input) {  // insert in time order (it lands at most a few places from the end)
        int k = input_count[r]++;
        for (; k > 0 && rank_inputs[k - 1] > now; --k) rank_inputs[k] = rank_inputs[k - 1];
        rank_inputs[k] = now;
      }
    }
}

/// Every op as early as its dependencies and its rank's previous op allow, at unit cost and no
/// communication time, visited in slot order; returns false where an op would wait for one not yet
/// visited (a block that breaks a dependency: never for the built-in blocks).
constexpr bool v_as_early(v_slots& s) {
  const int p = s.ranks(), h = s.horizon();
  buffer<int> start_buffer(s.entries(), -1), free_buffer(static_cast<std::size_t>(p));
  int *start = start_buffer.data(), *free_at = free_buffer.data();  // free_at: each rank's next free time
  for (int t = 0; t < h; ++t)
    for (int r = 0; r < p; ++r) {
      const int code = s.timeline(r)[t];
      if (code < 0) continue;
      const int kind = v_slots::kind_of(code), j = v_slots::index_of(code);
      int begin = free_at[r];
      bool ok = true;
      auto after = [&](std::size_t other) {
        ok = ok && start[other] >= 0;
        begin = start[other] + 1 > begin ? start[other] + 1 : begin;
      };
      if ((kind == v_f0 || kind == v_i1) && r > 0) after(s.entry(r - 1, kind, j));
      if ((kind == v_f1 || kind == v_i0) && r + 1 < p) after(s.entry(r + 1, kind, j));
      if (kind > v_f0 && kind < v_w) after(s.entry(r, kind - 1, j));
      if (j > 0) after(s.entry(r, kind, j - 1));
      if (!ok) return false;
      start[s.entry(r, kind, j)] = begin;
      free_at[r] = begin + 1;
    }
  s.retime(start);
  return true;
}

/// The whole construction (steps 1-5) for p ranks and m microbatches; false if a step fails.
constexpr bool v_build(v_slots& s, v_block b) {
  const int p = s.ranks(), m = s.microbatches();
  for (int r = 0; r < p; ++r) {
    const v_offsets o = v_block_offsets(b, p, r);
    for (int kind = 0; kind < 4; ++kind)
      for (int j = 0; j < m; ++j) s.place(r, kind, j, o.at[kind] + 6 * j);
  }
  for (int r = 0; r < p; ++r) v_place_weights(s, r, false);
  v_squeeze(s, true);
  if (!v_as_early(s)) return false;
  s.drop_weights();
  v_squeeze(s, false);
  for (int r = 0; r < p; ++r) v_place_weights(s, r, false);
  if (!v_as_early(s)) return false;
  s.drop_weights();
  for (int r = 0; r < p; ++r) v_place_weights(s, r, true);
  return true;
}

/// The slots a V block's construction needs on each rank: the block's span plus room for every W.
constexpr int v_horizon(v_block b, int p, int m) {
  int last = 0;
  for (int r = 0; r < p; ++r) {
    const v_offsets o = v_block_offsets(b, p, r);
    for (int kind = 0; kind < 4; ++kind) last = max_int(last, o.at[kind] + 6 * (m - 1));
  }
  return last + 1 + 2 * m + 1;
}

/// Writes the schedule: each rank's ops in slot order, as ctpipe tasks (chunk 0 = stage r, chunk
/// 1 = stage 2p-1-r).
template <class Sink>
constexpr void emit_v_blocks(v_block b, int p, int m, Sink& out) {
  v_slots s(p, m, v_horizon(b, p, m));
  if (!v_build(s, b)) return;  // (never for the built-in blocks; an empty table fails its proof)
  for (int r = 0; r < p; ++r) {
    const int* line = s.timeline(r);
    for (int t = 0, h = s.horizon(); t < h; ++t) {
      const int code = line[t];
      if (code < 0) continue;
      const int kind = v_slots::kind_of(code), j = v_slots::index_of(code);
      const bool chunk1 = kind == v_f1 || kind == v_i1 || kind == v_w1;
      const op_kind op = kind <= v_f1   ? op_kind::forward
                         : kind <= v_i0 ? op_kind::backward_input
                                        : op_kind::backward_weight;
      out.push(r, make_compute(op, chunk1 ? 2 * p - 1 - r : r, j));
    }
  }
}

}  // namespace ctpipe::detail
