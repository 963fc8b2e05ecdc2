// The Zero Bubble paper's automatic scheduler (Qi et al., ICLR 2024, section 3.1), one stage a
// rank: a greedy pass that places each rank's F, I and W in time for given per-stage costs, a
// communication latency and a memory limit, under three switches, the best of the eight kept:
//
//  - warm-up: every stage runs microbatch 0's F; then, from the last stage up, each stage adds as
//    many F as fit in memory and in the time before the first I reaches it (with
//    `bubble_before_first_i` one F more may overrun that time); each stage keeps at least one F more
//    than the next; then microbatch 0's I from the last stage up;
//  - steady: for each later microbatch, a round of F (stage by stage, down) and a round of I (up);
//    before an op, W run while memory is short and while a W fits in the wait for the op's input;
//    one more W where a shorter wait would make this stage the most idle of all (and, with
//    `greedy_w`, even where it would not); with `prioritize_i`, a stage two F ahead of the next
//    skips its F when the next stage's F and I would otherwise wait for it; stage 0, its F done,
//    runs every pending W before each I;
//  - the rest of each stage's W at the end.
//
// The memory, in the costs' unit: + activation at F, - (activation - weight_stash) at I, - weight_stash
// at W; by default 1 and 1 (+1 at F, 0 at I, -1 at W: ctpipe's peak_live).
#pragma once

#include <cstddef>

#include <ctpipe/detail/buffer.hpp>

namespace ctpipe {

/// One stage's op costs, in any integer unit (microseconds, say): F, I (input gradient) and W
/// (weight gradient); a full backward costs I + W.
struct op_costs {
  int forward = 1, input = 1, weight = 1;
  friend constexpr bool operator==(const op_costs&, const op_costs&) = default;
};

/// Per-stage costs for synthesis (stages beyond the schedule's ranks are unused), the latency of a
/// message between ranks, and the memory a microbatch holds on a rank, in the memory limit's unit:
/// `activation` from its F, `weight_stash` of it kept from its I until its W (at most `activation`).
/// By default both 1: the limit counts whole activations, as the analysis' peak does (ctpipe's
/// executors keep a microbatch's activations until its W). The Zero Bubble paper's model frees at I
/// what only I needs (its M_B and M_W). A structural type: it can be a template argument.
struct synthesis_costs {
  static constexpr int max_stages = 32;
  op_costs stage[max_stages]{};
  int comm = 0;
  int activation = 1, weight_stash = 1;

  /// The same costs with memory counted as `activation` at F and `weight_stash` kept from I to W.
  constexpr synthesis_costs with_memory(int activation_, int weight_stash_) const {
    synthesis_costs c = *this;
    c.activation = activation_;
    c.weight_stash = weight_stash_;
    return c;
  }
  /// What an op of `kind` (0 F, 1 I, 2 W) adds to a rank's memory.
  constexpr int memory_of(int kind) const {
    return kind == 0 ? activation : kind == 1 ? weight_stash - activation : -weight_stash;
  }

  /// Every stage alike.
  static constexpr synthesis_costs uniform(int forward, int input, int weight, int comm = 0) {
    synthesis_costs c{};
    for (op_costs& s : c.stage) s = {forward, input, weight};
    c.comm = comm;
    return c;
  }
  friend constexpr bool operator==(const synthesis_costs&, const synthesis_costs&) = default;
};

namespace detail {

inline constexpr int syn_f = 0, syn_i = 1, syn_w = 2;

/// One order of every stage's ops and its timing: `kind`/`microbatch` per stage in program order
/// (3m each), each op's end time, each stage's idle time within its span; `span` the largest span.
struct greedy_order {
  int p = 0, m = 0;
  buffer<int> kind, microbatch, end;  // kind/microbatch: [stage * 3m + position]; end: [(kind * p + stage) * m + mb]
  long long span = 0;
  bool ok = false;
  constexpr greedy_order(int ranks, int microbatches)
      : p(ranks),
        m(microbatches),
        kind(static_cast<std::size_t>(ranks) * 3 * microbatches),
        microbatch(static_cast<std::size_t>(ranks) * 3 * microbatches),
        end(static_cast<std::size_t>(ranks) * 3 * microbatches, -1) {}
};

/// The scheduler's state while it places ops.
class greedy_state {
 public:
  constexpr greedy_state(int p, int m, const synthesis_costs& c, int limit, greedy_order& out)
      : p_(p),
        m_(m),
        c_(c),
        limit_(limit),
        count_buffer_(static_cast<std::size_t>(p) * 3),
        e_buffer_(static_cast<std::size_t>(p)),
        mem_buffer_(static_cast<std::size_t>(p)),
        idle_buffer_(static_cast<std::size_t>(p)),
        placed_buffer_(static_cast<std::size_t>(p)),
        count_(count_buffer_.data()),
        e_(e_buffer_.data()),
        mem_(mem_buffer_.data()),
        idle_(idle_buffer_.data()),
        placed_(placed_buffer_.data()),
        end_(out.end.data()),
        kind_(out.kind.data()),
        microbatch_(out.microbatch.data()) {}
  constexpr greedy_state(const greedy_state&) = delete;
  constexpr greedy_state& operator=(const greedy_state&) = delete;

  constexpr int count(int stage, int kind) const { return count_[stage * 3 + kind]; }
  constexpr long long free_at(int stage) const { return e_[stage]; }
  constexpr int memory(int stage) const { return mem_[stage]; }
  constexpr long long idle(int stage) const { return idle_[stage]; }
  constexpr long long most_idle() const {
    long long most = 0;
    for (int j = 0; j < p_; ++j) most = idle_[j] > most ? idle_[j] : most;
    return most;
  }
  constexpr int cost(int stage, int kind) const {
    const op_costs& s = c_.stage[stage];
    return kind == syn_f ? s.forward : kind == syn_i ? s.input : s.weight;
  }
  constexpr int memory_of(int kind) const { return c_.memory_of(kind); }
  constexpr int limit() const { return limit_; }
  constexpr int comm() const { return c_.comm; }
  /// When op (kind, stage, mb) ended (-1: not placed).
  constexpr long long ended(int kind, int stage, int mb) const {
    return end_[(static_cast<std::size_t>(kind) * p_ + stage) * m_ + mb];
  }

  /// Places the stage's next op of `kind` as early as its rank and its input allow.
  constexpr void put(int j, int kind) {
    const int mb = count(j, kind);
    const long long c = cost(j, kind), no_wait = free_at(j) + c;
    long long at = no_wait;
    const long long input = kind == syn_f && j > 0        ? ended(syn_f, j - 1, mb)
                            : kind == syn_i && j + 1 < p_ ? ended(syn_i, j + 1, mb)
                                                          : 0;
    if (input < 0) {  // its input is not placed yet: the pass fails (the paper's code stops there too)
      broken_ = true;
      return;
    }
    if ((kind == syn_f && j > 0) || (kind == syn_i && j + 1 < p_)) at = max_ll(at, input + comm() + c);
    if (count(j, syn_f) > 0) idle_[j] += at - no_wait;
    e_[j] = at;
    end_[(static_cast<std::size_t>(kind) * p_ + j) * m_ + mb] = static_cast<int>(at);
    mem_[j] += memory_of(kind);
    const std::size_t slot = static_cast<std::size_t>(j) * 3 * m_ + placed_[j]++;
    kind_[slot] = kind;
    microbatch_[slot] = mb;
    ++count_[j * 3 + kind];
  }
  /// Runs W until one more op of memory `need` fits; false where no W is left to run.
  constexpr bool make_room(int j, int need) {
    while (memory(j) + need > limit_) {
      if (count(j, syn_w) >= count(j, syn_i)) return false;
      put(j, syn_w);
    }
    return true;
  }
  /// Before an op whose input arrives at `ready`: W while one fits in the wait; then one more if
  /// the wait left is longer than what would make this stage the most idle (or, with `greedy`, also
  /// when it is not).
  constexpr void fill(int j, long long ready, bool greedy) {
    while (count(j, syn_w) < count(j, syn_i) && free_at(j) + cost(j, syn_w) <= ready) put(j, syn_w);
    if (count(j, syn_w) < count(j, syn_i) && free_at(j) < ready) {
      if (ready - free_at(j) <= most_idle() - idle(j)) {
        if (greedy) put(j, syn_w);
      } else {
        put(j, syn_w);
      }
    }
  }
  static constexpr long long max_ll(long long a, long long b) { return a > b ? a : b; }
  /// An op was asked for before its input: the pass cannot go on.
  constexpr bool broken() const { return broken_; }

 private:
  int p_, m_;
  const synthesis_costs& c_;
  int limit_;
  buffer<int> count_buffer_;
  buffer<long long> e_buffer_;
  buffer<int> mem_buffer_;
  buffer<long long> idle_buffer_;
  buffer<int> placed_buffer_;
  // (Hot loops index raw pointers: a buffer's operator[] or data() is a call, and each call costs
  // constant-evaluation steps.)
  int* count_;
  long long* e_;
  int* mem_;
  long long* idle_;
  int* placed_;
  int *end_, *kind_, *microbatch_;
  bool broken_ = false;
};

/// One pass of the scheduler under the three switches; `out.ok` false where memory ran out or an op
/// came before its input (the paper's code stops there too).
constexpr void greedy_pass(int p, int m, const synthesis_costs& c, int limit, bool bubble_before_first_i,
                           bool prioritize_i, bool greedy_w, bool trim_warmup, greedy_order& out) {
  greedy_state s(p, m, c, limit, out);
  buffer<int> more(static_cast<std::size_t>(p));
  int* f_more = more.data();
  // Microbatch 0: its F everywhere, the warm-up F, its I from the last stage up.
  const int f_memory = c.memory_of(syn_f);
  for (int j = 0; j < p; ++j) {
    if (!s.make_room(j, f_memory)) return;
    s.put(j, syn_f);
  }
  long long first_i = 0;  // when microbatch 0's I would reach the stage
  for (int j = p - 1; j >= 0; --j) {
    if (j == p - 1) {
      first_i = s.ended(syn_f, j, 0) + s.cost(j, syn_i);
      continue;
    }
    int mem = s.memory(j);
    long long t = s.free_at(j);
    while (s.count(j, syn_f) + f_more[j] < m && mem + f_memory <= limit) {
      const int f = s.cost(j, syn_f);
      if (bubble_before_first_i ? t + f > first_i + s.comm() : t >= first_i + s.comm()) break;
      mem += f_memory;
      t += f;
      ++f_more[j];
    }
    first_i = greedy_state::max_ll(t, first_i + s.comm()) + s.cost(j, syn_i);
  }
  for (int j = 1; j < p; ++j) {
    while (f_more[j] > 0 && f_more[j] >= f_more[j - 1] && s.count(j, syn_f) + f_more[j] < m) --f_more[j];
    if (trim_warmup && f_more[j] > f_more[j - 1]) f_more[j] = f_more[j - 1];  // never ahead of the stage before
  }
  for (int j = 0; j < p; ++j)
    for (int k = 0; k < f_more[j]; ++k) s.put(j, syn_f);
  for (int j = p - 1; j >= 0; --j) s.put(j, syn_i);
  if (s.broken()) return;
  // The later microbatches: a round of F down the stages, a round of I up.
  for (int i = 1; i < m; ++i) {
    for (int j = 0; j < p; ++j) {
      f_more[j] = 0;
      if (s.count(j, syn_f) >= m) continue;
      if (prioritize_i && j + 1 < p && s.count(j, syn_f) >= s.count(j + 1, syn_f) + 2) {
        const long long next = s.free_at(j + 1) + s.cost(j + 1, syn_f) + s.cost(j + 1, syn_i) + s.comm();
        if (s.free_at(j) >= next) continue;
        long long w_cost = 0;
        int w_count = 0, mem = s.memory(j) + f_memory;
        while (mem > limit && s.count(j, syn_w) + w_count < s.count(j, syn_i)) {
          w_cost += s.cost(j, syn_w);
          mem += c.memory_of(syn_w);
          ++w_count;
        }
        if (s.free_at(j) + s.cost(j, syn_f) + w_cost <= next) {
          f_more[j] = 1;
          continue;
        }
        if (next - s.free_at(j) <= s.most_idle() - s.idle(j)) continue;
      }
      f_more[j] = 1;
    }
    for (int j = p - 2; j >= 0; --j) f_more[j] = f_more[j] < f_more[j + 1] ? f_more[j] : f_more[j + 1];
    for (int j = 0; j < p; ++j) {
      if (f_more[j] == 0) continue;
      if (!s.make_room(j, f_memory)) return;
      if (j > 0) s.fill(j, s.ended(syn_f, j - 1, s.count(j, syn_f)) + s.comm(), greedy_w);
      s.put(j, syn_f);
    }
    for (int j = p - 1; j >= 0; --j) {
      if (!s.make_room(j, c.memory_of(syn_i))) return;
      if (j + 1 < p) s.fill(j, s.ended(syn_i, j + 1, i) + s.comm(), greedy_w);
      if (j == 0 && s.count(j, syn_f) == m)
        while (s.count(j, syn_w) < s.count(j, syn_i)) s.put(j, syn_w);
      s.put(j, syn_i);
    }
    if (s.broken()) return;
  }
  for (int j = 0; j < p; ++j)
    while (s.count(j, syn_w) < m) s.put(j, syn_w);
  long long span = 0;
  for (int j = 0; j < p; ++j) {
    const long long own = s.ended(syn_w, j, m - 1) - s.ended(syn_f, j, 0) + s.cost(j, syn_f);
    span = own > span ? own : span;
  }
  out.span = span;
  out.ok = true;
}

/// The best of the eight passes (the first of equals, in the order the paper's code tries them);
/// `ok` false where none fits the limit. Where every pass stops because the warm-up would put a
/// stage's F ahead of the stage before it (the paper's code stops there: few microbatches and a
/// loose limit), the eight run again with that stage's warm-up trimmed to the one before.
constexpr greedy_order greedy_schedule(int p, int m, const synthesis_costs& c, int limit) {
  greedy_order best(p, m);
  for (int trim = 0; trim < 2 && !best.ok; ++trim)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        for (int g = 0; g < 2; ++g) {
          greedy_order o(p, m);
          greedy_pass(p, m, c, limit, a == 0, b == 0, g == 0, trim == 1, o);
          if (o.ok && (!best.ok || o.span < best.span)) best = static_cast<greedy_order&&>(o);
        }
  return best;
}

}  // namespace detail
}  // namespace ctpipe
