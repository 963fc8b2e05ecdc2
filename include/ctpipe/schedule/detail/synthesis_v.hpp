// The controllable-memory paper's scheduler for V placement (Qi et al., NeurIPS 2024; the authors'
// V scheduler, restated): rank r holds stages r and 2p-1-r, and a greedy pass places each rank's
// F, I and W of both stages in time for the costs, the message latency and a memory limit:
//
//  - warm-up: microbatch 0's F of the first stage everywhere; then, from the last rank up, each
//    rank (with the ranks before it) adds first-stage F while memory allows 2(r+1) more and they fit
//    before microbatch 0's F of the second stage comes back; then its second-stage F; then, down
//    the ranks, rounds of F (alternating the two stages, from the last rank to this one) until each
//    rank holds no fewer F than the rank before;
//  - steady: 2m rounds, each a round of I (first the ranks whose next I is of their first stage and
//    its input has come, from the last rank up; then the others' second-stage I, from rank 0 down)
//    and a round of F (each rank's second-stage F where its input has come, else its first-stage
//    F); before each op, W run while memory is short and while a W fits in the wait for the op's
//    input, and one more where the wait is longer than what would make this rank the most idle
//    (always before a first-stage I; with `fill_i` / `fill_f` before the other I / any F);
//  - the rest of the W at the end.
// The best of four passes (`fill_i`, `fill_f`); each pass reruns with the idle time of the pass
// before accepted while the largest span falls. Memory as in synthesis_greedy.hpp.
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/detail/synthesis_greedy.hpp>

namespace ctpipe::detail {

/// One V order: per rank 6m ops (kind 0 F, 1 I, 2 W; stage; microbatch) in program order, each
/// rank's idle time within its span, the largest span and the most memory a rank held.
struct v_greedy_order {
  int p = 0, m = 0;
  buffer<int> kind, stage, microbatch;  // [rank * 6m + position]
  buffer<long long> idle;               // per rank
  long long span = 0;
  int peak = 0;
  bool ok = false;
  constexpr v_greedy_order(int ranks, int microbatches)
      : p(ranks),
        m(microbatches),
        kind(static_cast<std::size_t>(ranks) * 6 * microbatches),
        stage(static_cast<std::size_t>(ranks) * 6 * microbatches),
        microbatch(static_cast<std::size_t>(ranks) * 6 * microbatches),
        idle(static_cast<std::size_t>(ranks)) {}
};

// The pass's state. Ops are named by kind (0 F, 1 I, 2 W) and lane: lane 0 is the rank's first
// stage for F and its second for I and W (the order a microbatch meets them), lane 1 the other.
class v_greedy_state {
 public:
  constexpr v_greedy_state(int p, int m, const synthesis_costs& c, int limit, const long long* approved,
                           v_greedy_order& out)
      : p_(p),
        m_(m),
        c_(c),
        limit_(limit),
        approved_(approved),
        count_(static_cast<std::size_t>(p) * 6),
        end_(static_cast<std::size_t>(p) * 6 * m, -1),
        now_(static_cast<std::size_t>(p)),
        mem_(static_cast<std::size_t>(p)),
        placed_(static_cast<std::size_t>(p)),
        pending_(static_cast<std::size_t>(p) * 2 * m),
        head_(static_cast<std::size_t>(p)),
        tail_(static_cast<std::size_t>(p)),
        out_(out) {
    for (int r = 0; r < p; ++r)
      most_approved_ = approved && approved[r] > most_approved_ ? approved[r] : most_approved_;
  }
  constexpr v_greedy_state(const v_greedy_state&) = delete;
  constexpr v_greedy_state& operator=(const v_greedy_state&) = delete;

  constexpr int count(int r, int kind, int lane) const { return count_.data()[r * 6 + kind * 2 + lane]; }
  constexpr long long now(int r) const { return now_.data()[r]; }
  constexpr int memory(int r) const { return mem_.data()[r]; }
  constexpr bool broken() const { return broken_; }
  constexpr bool pending(int r) const { return head_.data()[r] < tail_.data()[r]; }
  constexpr int stage_of(int r, int kind, int lane) const {
    return (kind == syn_f) == (lane == 0) ? r : 2 * p_ - 1 - r;
  }
  constexpr int cost(int r, int kind, int lane) const {
    const op_costs& s = c_.stage[stage_of(r, kind, lane)];
    return kind == syn_f ? s.forward : kind == syn_i ? s.input : s.weight;
  }
  /// When op (kind, lane, rank, mb) ended (-1: not placed); index -1 reads the last op's, as the
  /// authors' code does where an op has no input to wait for.
  constexpr long long ended(int kind, int lane, int r, int mb) const { return end_.data()[id(kind, lane, r, mb)]; }
  constexpr long long ended_at(long long at) const { return end_.data()[at < 0 ? end_.size() - 1 : at]; }
  constexpr long long id(int kind, int lane, int r, int mb) const {
    return ((static_cast<long long>(kind) * 2 + lane) * p_ + r) * m_ + mb;
  }
  /// The most idle time of any rank (and, for rank r, what the pass before accepted beyond r's).
  constexpr long long most_idle(int r) const {
    long long most = 0;
    for (int j = 0; j < p_; ++j) most = out_.idle.data()[j] > most ? out_.idle.data()[j] : most;
    if (r >= 0 && approved_) {
      const long long beyond = most_approved_ - approved_[r];
      most = beyond > most ? beyond : most;
    }
    return most;
  }

  /// Places rank r's next op of (kind, lane) as early as the rank and the op's input allow; a
  /// broken pass where it cannot (no microbatch left, over the limit, its input not yet placed).
  constexpr void put(int kind, int lane, int r) {
    if (broken_) return;
    const int mb = count(r, kind, lane), c = cost(r, kind, lane);
    const int need = c_.memory_of(kind);
    if (mb >= m_ || mem_.data()[r] + need > limit_) return fail();
    if (kind == syn_w
            ? ended(syn_i, lane, r, mb) < 0
            : (kind > 0 || lane > 0) && ended((kind * 2 + lane - 1) / 2, (kind * 2 + lane - 1) % 2, r, mb) < 0)
      return fail();
    const long long no_wait = now(r) + c;
    long long at = no_wait;
    if (kind != syn_w && ((lane == 1 && r + 1 < p_) || (lane == 0 && r > 0))) {
      const long long input = ended(kind, lane, lane == 1 ? r + 1 : r - 1, mb);
      if (input < 0) return fail();
      at = input + c_.comm + c > at ? input + c_.comm + c : at;
    }
    if (count(r, syn_f, 0) > 0) out_.idle.data()[r] += at - no_wait;
    end_.data()[id(kind, lane, r, mb)] = at;
    now_.data()[r] = at;
    mem_.data()[r] += need;
    out_.peak = mem_.data()[r] > out_.peak ? mem_.data()[r] : out_.peak;
    const std::size_t slot = static_cast<std::size_t>(r) * 6 * m_ + placed_.data()[r]++;
    out_.kind.data()[slot] = kind;
    out_.stage.data()[slot] = stage_of(r, kind, lane);
    out_.microbatch.data()[slot] = mb;
    if (kind == syn_i) pending_.data()[static_cast<std::size_t>(r) * 2 * m_ + tail_.data()[r]++] = lane;
    ++count_.data()[r * 6 + kind * 2 + lane];
  }
  /// The oldest I's W.
  constexpr void put_w(int r) {
    if (!pending(r)) return fail();
    put(syn_w, pending_.data()[static_cast<std::size_t>(r) * 2 * m_ + head_.data()[r]++], r);
  }
  /// W until an op of memory `need` fits.
  constexpr void make_room(int r, int need) {
    while (!broken_ && memory(r) + need > limit_) put_w(r);
  }
  /// Before an op whose input is op `input` (an index, or -1): W while one fits in the wait, then one
  /// more where the wait left is longer than what would make this rank the most idle (if `more`).
  constexpr void fill(int r, long long input, bool more) {
    while (!broken_ && pending(r) && input >= 0 && ended_at(input) + c_.comm >= now(r) + cost_w(r)) put_w(r);
    if (!broken_ && pending(r) && ended_at(input) + c_.comm - now(r) > most_idle(r) - out_.idle.data()[r] && more)
      put_w(r);
  }
  constexpr void fail() { broken_ = true; }

 private:
  constexpr int cost_w(int r) const {  // the next W's cost
    return cost(r, syn_w, pending_.data()[static_cast<std::size_t>(r) * 2 * m_ + head_.data()[r]]);
  }
  int p_, m_;
  const synthesis_costs& c_;
  int limit_;
  const long long* approved_;
  long long most_approved_ = -1;
  buffer<int> count_;
  buffer<long long> end_, now_;
  buffer<int> mem_, placed_, pending_, head_, tail_;
  v_greedy_order& out_;
  bool broken_ = false;
};

/// One pass under the two switches (`approved`: each rank's idle time in the pass before, or null).
constexpr void v_greedy_pass(int p, int m, const synthesis_costs& c, int limit, bool fill_i, bool fill_f,
                             const long long* approved, v_greedy_order& out) {
  v_greedy_state s(p, m, c, limit, approved, out);
  const int f_memory = c.memory_of(syn_f);
  for (int r = 0; r < p; ++r) s.put(syn_f, 0, r);
  for (int r = p - 1; r >= 0; --r) {
    if (r + 1 < p) {
      const long long back = s.ended(syn_f, 1, r + 1, 0) + c.comm;
      while (!s.broken() && s.memory(r) + f_memory * (2 + 2 * r) <= limit && s.now(r) + s.cost(r, syn_f, 0) <= back &&
             s.count(r, syn_f, 0) < m - r)
        for (int j = 0; j <= r; ++j) s.put(syn_f, 0, j);
    }
    s.put(syn_f, 1, r);
  }
  int lane = 0;
  for (int r = 1; r < p && !s.broken(); ++r) {
    int idle_rounds = 0;
    while (!s.broken() &&
           (s.count(r, syn_f, 0) + s.count(r, syn_f, 1) < s.count(r - 1, syn_f, 0) + s.count(r - 1, syn_f, 1) ||
            (s.count(r, syn_f, 1) <= s.count(r - 1, syn_f, 1) && s.count(r - 1, syn_f, 1) < m))) {
      bool any = false;
      for (int j = p - 1; j >= r; --j)
        if (s.count(j, syn_f, lane) < m) {
          s.put(syn_f, lane, j);
          any = true;
        }
      lane = 1 - lane;
      idle_rounds = any ? 0 : idle_rounds + 1;
      if (idle_rounds == 2) s.fail();  // nothing left to place, and the ranks still uneven
    }
  }
  buffer<int> lane_of(static_cast<std::size_t>(p));  // each rank's I this round
  for (int round = 0; round < 2 * m && !s.broken(); ++round) {
    for (int r = 0; r < p; ++r) {
      s.make_room(r, c.memory_of(syn_i));
      // Its first stage's I (lane 1) where one is owed and its input has come (or no second-stage I
      // is left), else its second stage's.
      const int owed = s.count(r, syn_i, 1);
      lane_of.data()[r] = owed < s.count(r, syn_i, 0) &&
                          (r == p - 1 || s.ended(syn_i, 1, r + 1, owed) >= 0 || s.count(r, syn_i, 0) >= m);
    }
    // First-stage I from the last rank up, then second-stage I down the ranks.
    for (int k = 0; k < 2 * p && !s.broken(); ++k) {
      const int r = k < p ? p - 1 - k : k - p, l = k < p ? 1 : 0;
      if (lane_of.data()[r] != l) continue;
      const long long input = l == 1 && r + 1 < p ? s.id(syn_i, 1, r + 1, s.count(r, syn_i, 1))
                              : l == 0 && r > 0   ? s.id(syn_i, 0, r - 1, s.count(r, syn_i, 0))
                                                  : -1;
      s.fill(r, input, l == 1 || fill_i);
      s.put(syn_i, l, r);
    }
    for (int r = 0; r < p && !s.broken(); ++r) {
      if (s.count(r, syn_f, 1) >= m) continue;
      int l = -1;  // its second stage's F where owed and its input has come, else its first stage's
      if (s.count(r, syn_f, 1) >= s.count(r, syn_f, 0))
        l = 0;
      else if (r == p - 1 || s.ended(syn_f, 1, r + 1, s.count(r, syn_f, 1)) >= 0)
        l = 1;
      else if (s.count(r, syn_f, 0) < m && (r == 0 || s.ended(syn_f, 0, r - 1, s.count(r, syn_f, 0)) >= 0))
        l = 0;
      if (l < 0) continue;
      s.make_room(r, f_memory);
      const long long input = l == 0 && r > 0       ? s.id(syn_f, 0, r - 1, s.count(r, syn_f, 0))
                              : l == 1 && r + 1 < p ? s.id(syn_f, 1, r + 1, s.count(r, syn_f, 1))
                                                    : -1;
      s.fill(r, input, fill_f);
      s.put(syn_f, l, r);
    }
  }
  for (int r = 0; r < p; ++r)
    while (!s.broken() && s.pending(r)) s.put_w(r);
  if (s.broken()) return;
  for (int r = 0; r < p; ++r) {
    if (s.count(r, syn_w, 0) + s.count(r, syn_w, 1) < 2 * m) return;  // the rounds ran out before the ops
    const long long own = s.now(r) - s.ended(syn_f, 0, r, 0) + s.cost(r, syn_f, 0);
    out.span = own > out.span ? own : out.span;
  }
  out.ok = true;
}

/// The best of the four passes (the first of equals, in the authors' order), each rerun with its
/// idle times accepted while its largest span falls; `ok` false where none fits the limit.
constexpr v_greedy_order v_greedy_schedule(int p, int m, const synthesis_costs& c, int limit) {
  v_greedy_order best(p, m);
  for (int i = 0; i < 2; ++i)
    for (int f = 0; f < 2; ++f) {
      v_greedy_order o(p, m);
      v_greedy_pass(p, m, c, limit, i == 0, f == 0, nullptr, o);
      while (o.ok) {
        v_greedy_order next(p, m);
        v_greedy_pass(p, m, c, limit, i == 0, f == 0, o.idle.data(), next);
        if (!next.ok || next.span >= o.span) break;
        o = static_cast<v_greedy_order&&>(next);
      }
      if (o.ok && (!best.ok || o.span < best.span)) best = static_cast<v_greedy_order&&>(o);
    }
  return best;
}

}  // namespace ctpipe::detail
