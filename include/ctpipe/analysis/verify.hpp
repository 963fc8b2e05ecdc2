// Verification: the rules every table must follow, checked by the same constexpr code at compile
// time and at run time. A failure names the rule, the rank and the position in that rank's program.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>  // std::is_constant_evaluated, std::is_same_v

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// The rules of a valid table: the one list that the enum, the words, the static_asserts of
/// check<table>() and the function form's errors are all generated from. X(rule, words).
#define CTPIPE_CHECK_RULES(X)                                                                                         \
  X(stage_out_of_range, "every task must name a stage that exists")                                                   \
  X(microbatch_out_of_range, "every task must name a microbatch that exists")                                         \
  X(wrong_direction,                                                                                                  \
    "in a bidirectional table a microbatch runs only through the stages of its own direction, and no value crosses "  \
    "between the two")                                                                                                \
  X(wrong_rank, "each op must run on the rank that holds its stage")                                                  \
  X(duplicate_op, "every op must appear exactly once, and this one appears again")                                    \
  X(missing_op, "every compute op must appear exactly once, and this one is missing")                                 \
  X(mixed_backward, "a stage and microbatch must use either B, or I and W, never both")                               \
  X(backward_in_forward_only,                                                                                         \
    "a forward-only table (schedule_info::forward_only) runs no B, I or W and sends no gradients")                    \
  X(overlap_pair, "an overlapped F (F&B) must be directly followed by the full B it runs with, which cannot need it") \
  X(dependency_order, "an op must come after the ops of its own rank that it depends on")                             \
  X(wrong_peer,                                                                                                       \
    "a send or receive must name the other rank, which holds the neighbouring stage (for a skip message, the stage "  \
    "at its other end)")                                                                                              \
  X(bad_crossing,                                                                                                     \
    "the crossings a table lists must each join two stages of a chain at least two apart, in increasing order of "    \
    "(from, to), each pair once")                                                                                     \
  X(wrong_crossing, "a skip message must join the two stages of a crossing the table lists, in its direction")        \
  X(missing_receive, "an op whose input is on another rank must be preceded by its receive")                          \
  X(missing_send, "a value consumed on another rank must be sent after it is produced")                               \
  X(unpaired_send_receive,                                                                                            \
    "sends and receives must pair up in the same order between every two ranks (activations and gradients each)")     \
  X(deadlock, "the table must run to completion, and here every rank left waits on a receive")

/// The rules of a valid table (CTPIPE_CHECK_RULES), and `ok`.
enum class check_rule : int {
  ok,
#define CTPIPE_DETAIL_RULE_ENUM(rule, words) rule,
  CTPIPE_CHECK_RULES(CTPIPE_DETAIL_RULE_ENUM)
#undef CTPIPE_DETAIL_RULE_ENUM
};

/// The rule in words a user can read.
constexpr std::string_view rule_text(check_rule r) {
  switch (r) {
    case check_rule::ok:
      return "ok";
#define CTPIPE_DETAIL_RULE_TEXT(rule, words) \
  case check_rule::rule:                     \
    return words;
      CTPIPE_CHECK_RULES(CTPIPE_DETAIL_RULE_TEXT)
#undef CTPIPE_DETAIL_RULE_TEXT
  }
  return "?";
}

/// The result of verify(): ok, or the first broken rule with where it broke.
/// `position` is the index in rank `rank`'s program (-1 when the op is missing altogether).
struct verification {
  check_rule rule = check_rule::ok;
  int rank = -1;
  int position = -1;
  task op{};

  constexpr bool ok() const { return rule == check_rule::ok; }
  constexpr explicit operator bool() const { return ok(); }
};

/// Compile-time errors of ctpipe's function forms (check(t), analyse(t), simulate(t),
/// plan_memory(t) on a table that breaks a rule, evaluated in a constant expression): a call to the
/// function named after the broken rule, which is not constexpr, so that the compiler stops there
/// and names it (clang's notes add the rank and position). They do nothing at run time (defined,
/// so that unoptimised builds link). The template forms (check<table>()) say the rule in a
/// static_assert's words instead.
namespace detail::check_failed {
#define CTPIPE_DETAIL_RULE_FUNCTION(rule, words) \
  inline void rule(int /*rank*/, int /*position*/) {}
CTPIPE_CHECK_RULES(CTPIPE_DETAIL_RULE_FUNCTION)
#undef CTPIPE_DETAIL_RULE_FUNCTION
}  // namespace detail::check_failed

namespace detail {
/// In a constant evaluation, stops at check_failed::<rule> when `v` is not ok; nothing otherwise.
constexpr void stop_constant_evaluation(const verification& v) {
  if (std::is_constant_evaluated()) {
    switch (v.rule) {
      case check_rule::ok:
        break;
#define CTPIPE_DETAIL_RULE_CALL(rule, words) \
  case check_rule::rule:                     \
    check_failed::rule(v.rank, v.position);  \
    break;
        CTPIPE_CHECK_RULES(CTPIPE_DETAIL_RULE_CALL)
#undef CTPIPE_DETAIL_RULE_CALL
    }
  }
}
}  // namespace detail

/// "F stage 2 mb 5" / "RECV_F stage 1 mb 3 from rank 0" / "SEND_SKIP_F stage 0 mb 1 to rank 2 (stage 3)".
inline std::string describe(const task& t) {
  std::string s(op_name(t.op));
  s += " stage " + std::to_string(t.stage) + " mb " + std::to_string(t.microbatch);
  if (is_send(t.op)) s += " to rank " + std::to_string(t.peer);
  if (is_recv(t.op)) s += " from rank " + std::to_string(t.peer);
  if (is_skip(t.op)) s += " (stage " + std::to_string(t.other) + ")";
  if (t.overlapped) s += " (overlapped with the next B)";
  return s;
}

/// One line: which rule, which rank, which position, which op (for a bad crossing: which crossing).
inline std::string message(const verification& v) {
  if (v.ok()) return "ok";
  if (v.rule == check_rule::bad_crossing)
    return "crossing " + std::to_string(v.position) + " (stage " + std::to_string(v.op.stage) + " to stage " +
           std::to_string(v.op.other) + "): " + std::string(rule_text(v.rule));
  std::string s = "rank " + std::to_string(v.rank);
  s += v.position >= 0 ? ", position " + std::to_string(v.position) : std::string(", missing");
  s += " (" + describe(v.op) + "): " + std::string(rule_text(v.rule));
  return s;
}

/// Thrown by the run-time entry points given a table that breaks a rule.
class verification_error : public std::logic_error {
 public:
  explicit verification_error(const verification& v) : std::logic_error("ctpipe::check: " + message(v)), v_(v) {}
  const verification& result() const noexcept { return v_; }

 private:
  verification v_;
};

namespace detail {

inline constexpr int neighbour_kinds = 8;  // the kinds up to RECV_B, keyed by stage

// Where every op of a table is: for each (kind, stage, microbatch), its position + 1 in its
// rank's program (0 = absent); skip messages, after those, for each (kind, crossing, microbatch),
// the crossings of every chain counted one after the other. A value has one producer and one
// consumer, so a receive's send is found by its key, with no per-channel bookkeeping. (Written for
// constant-evaluation cost: clang 14 allows 1M evaluation steps by default, so the hot loops use
// raw pointers and few statements.)
struct table_index {
  int stages = 0, microbatches = 0;
  buffer<int> pos;
  buffer<const task*> data;         // each rank's program (t.program(r) builds a span: a call per use)
  buffer<int> size;                 // each rank's program length
  const crossing* cross = nullptr;  // the table's crossings (chain positions)
  int crossings = 0;                // how many, per chain
  int chain_length = 1;             // stages per chain
  int chains = 1;

  constexpr std::size_t key(op_kind k, int s, int mb) const {
    return (static_cast<std::size_t>(k) * static_cast<std::size_t>(stages) + static_cast<std::size_t>(s)) *
               static_cast<std::size_t>(microbatches) +
           static_cast<std::size_t>(mb);
  }
  constexpr int at(op_kind k, int s, int mb) const { return pos[key(k, s, mb)] - 1; }
  // The crossing from stage `producer` to stage `consumer`, numbered over every chain; -1 if the
  // table lists none (binary search: the list is in increasing order once verified).
  constexpr int skip_id(int producer, int consumer) const {
    if (producer < 0 || consumer < 0 || producer >= stages || consumer >= stages) return -1;
    const int c = producer / chain_length, a = producer % chain_length, b = consumer - c * chain_length;
    if (consumer / chain_length != c) return -1;
    int lo = 0, hi = crossings;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (cross[mid].from < a || (cross[mid].from == a && cross[mid].to < b))
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < crossings && cross[lo].from == a && cross[lo].to == b ? c * crossings + lo : -1;
  }
  // The crossing skip message `x` belongs to (-1: none).
  constexpr int skip_id(const task& x) const {
    return skip_at_producer[static_cast<int>(x.op)] ? skip_id(x.stage, x.other) : skip_id(x.other, x.stage);
  }
  // The key of a skip message of kind `k` on crossing `id`.
  constexpr std::size_t skip_key(int k, int id, int mb) const {
    return (static_cast<std::size_t>(neighbour_kinds) * static_cast<std::size_t>(stages) +
            static_cast<std::size_t>(k - neighbour_kinds) * static_cast<std::size_t>(chains * crossings) +
            static_cast<std::size_t>(id)) *
               static_cast<std::size_t>(microbatches) +
           static_cast<std::size_t>(mb);
  }
  constexpr int at_skip(op_kind k, int id, int mb) const { return pos[skip_key(static_cast<int>(k), id, mb)] - 1; }
  // The key of the op that comm op `x` pairs with (a verified table's: its skip messages' crossings exist).
  constexpr std::size_t partner_key(const task& x) const {
    return skip_op[static_cast<int>(x.op)]
               ? skip_key(static_cast<int>(partner_op[static_cast<int>(x.op)]), skip_id(x), x.microbatch)
               : (static_cast<std::size_t>(partner_op[static_cast<int>(x.op)]) * static_cast<std::size_t>(stages) +
                  static_cast<std::size_t>(x.stage + partner_delta[static_cast<int>(x.op)])) *
                         static_cast<std::size_t>(microbatches) +
                     static_cast<std::size_t>(x.microbatch);
  }
  // The key of comm op `x` itself.
  constexpr std::size_t own_key(const task& x) const {
    return skip_op[static_cast<int>(x.op)] ? skip_key(static_cast<int>(x.op), skip_id(x), x.microbatch)
                                           : key(x.op, x.stage, x.microbatch);
  }
  // Position of the op that comm op `x` pairs with (-1 if absent); for a neighbour's message one
  // expression, no calls.
  constexpr int partner(const task& x) const {
    return pos[skip_op[static_cast<int>(x.op)]
                   ? partner_key(x)
                   : (static_cast<std::size_t>(partner_op[static_cast<int>(x.op)]) * static_cast<std::size_t>(stages) +
                      static_cast<std::size_t>(x.stage + partner_delta[static_cast<int>(x.op)])) *
                             static_cast<std::size_t>(microbatches) +
                         static_cast<std::size_t>(x.microbatch)] -
           1;
  }
};

template <table_like Table>
constexpr void index_programs(const Table& t, table_index& ix) {
  const auto p = static_cast<std::size_t>(t.ranks());
  ix.data = buffer<const task*>(p);
  ix.size = buffer<int>(p);
  for (std::size_t r = 0; r < p; ++r) {
    const auto prog = t.program(static_cast<int>(r));
    ix.data[r] = prog.data();
    ix.size[r] = static_cast<int>(prog.size());
  }
  const auto cs = crossings_of(t);
  ix.cross = cs.data();
  ix.crossings = static_cast<int>(cs.size());
}

// run_blocking's on_op where nothing is done per op (verification): no call per op.
struct no_op {};

// Runs a table whose every receive has its send (verified) under blocking receives and buffered
// sends, calling on_op(rank, position, op) for every op (none for a no_op) in an order consistent
// with every dependency. A send at position z of rank a has run once pc[a] > z. Returns the lowest
// rank left waiting, or -1 when every rank ran to its end.
template <class OnOp>
constexpr int run_blocking(const table_index& ix, buffer<int>& pc, OnOp&& on_op) {
  const int p = static_cast<int>(ix.size.size());
  const std::size_t S = static_cast<std::size_t>(ix.stages), M = static_cast<std::size_t>(ix.microbatches);
  const int* pos = ix.pos.data();
  int* at = pc.data();
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const task* prog = ix.data.data()[r];
      const int n = ix.size.data()[r];
      int i = at[r];
      // Run rank r until it waits on a receive whose send (by its value key) has not run yet.
      // (A skip message's partner is looked up by its crossing, out of line: rare, and a call. The
      // task is copied once: each read through the pointer costs g++ time and memory.)
      for (; i < n; ++i) {
        const task x = prog[i];
        const int k = static_cast<int>(x.op);
        if (recv_op[k] && at[x.peer] < pos[skip_op[k] ? ix.partner_key(x)
                                                      : (static_cast<std::size_t>(partner_op[k]) * S +
                                                         static_cast<std::size_t>(x.stage + partner_delta[k])) *
                                                                M +
                                                            static_cast<std::size_t>(x.microbatch)])
          break;
        if constexpr (!std::is_same_v<std::remove_cvref_t<OnOp>, no_op>) on_op(r, i, x);
      }
      progress = progress || i != at[r];
      at[r] = i;
    }
  }
  for (int r = 0; r < p; ++r)
    if (pc[static_cast<std::size_t>(r)] < ix.size[static_cast<std::size_t>(r)]) return r;
  return -1;
}

// The deadlock rule's failure where run_blocking stopped with rank `stuck` waiting.
constexpr verification deadlock_at(const table_index& ix, const buffer<int>& pc, int stuck) {
  const int i = pc[static_cast<std::size_t>(stuck)];
  return {check_rule::deadlock, stuck, i, ix.data[static_cast<std::size_t>(stuck)][i]};
}

// verify(), leaving the position index behind for the analysis passes. `run` false leaves out the
// last rule, deadlock, for a caller that runs the table itself (simulate_indexed: the same run).
template <table_like Table>
constexpr verification verify_indexed(const Table& t, table_index& ix, bool run = true) {
  const int p = t.ranks(), S = t.stages(), m = t.microbatches();
  index_programs(t, ix);
  if (S <= 0 || m <= 0) return {};  // an empty table: nothing can break a rule
  if (const int d = directions_of(t); d < 1 || S % d != 0 || m % d != 0)
    return {check_rule::wrong_direction, 0, -1, make_compute(op_kind::forward, 0, 0)};
  // Stage and microbatch chains (one of S stages and m microbatches in a unidirectional table).
  const stage_chains chains = chains_of(t);
  const int len = chains.length, per = chains.microbatches;
  ix.stages = S;
  ix.microbatches = m;
  ix.chain_length = len;
  ix.chains = S / len;
  // 0. the crossings: in range, in increasing order, each once.
  for (int k = 0; k < ix.crossings; ++k) {
    const crossing& c = ix.cross[k];
    if (!crossing_in_range(c, len) ||
        (k > 0 && (ix.cross[k - 1].from > c.from || (ix.cross[k - 1].from == c.from && ix.cross[k - 1].to >= c.to))))
      return {check_rule::bad_crossing, -1, k, task{op_kind::send_skip_forward, c.from, 0, -1, false, c.to}};
  }
  ix.pos = buffer<int>(
      (static_cast<std::size_t>(neighbour_kinds) * static_cast<std::size_t>(S) +
       static_cast<std::size_t>(op_kind_count - neighbour_kinds) * static_cast<std::size_t>(ix.chains * ix.crossings)) *
      static_cast<std::size_t>(m));
  buffer<int> place(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) {
    place[static_cast<std::size_t>(s)] = t.rank_of(s);
    // A stage placed on no rank of the table: every one of its ops is missing.
    if (t.rank_of(s) < 0 || t.rank_of(s) >= p)
      return {check_rule::missing_op, t.rank_of(s), -1, make_compute(op_kind::forward, s, 0)};
  }
  const int* placement = place.data();
  int* pos = ix.pos.data();
  const bool fo = forward_only_of(t);
  // 1. ranges, placement, peers; every op at most once.
  for (int r = 0; r < p; ++r) {
    const task* prog = ix.data.data()[r];
    const int n = ix.size.data()[r];
    for (int i = 0; i < n; ++i) {
      const task x = prog[i];  // (a copy: each read through the pointer costs g++ more)
      // The stage at the other end of a comm op: its neighbour, or a skip message's `other`.
      const int nb = skip_op[static_cast<int>(x.op)] ? x.other : x.stage + partner_delta[static_cast<int>(x.op)];
      int id = 0, *slot = nullptr;  // a skip message's crossing; the op's place in the index
      // (One condition for every rule of this pass: each statement costs constant-evaluation steps,
      // an expression within one none.)
      if (x.stage < 0 || x.stage >= S || x.microbatch < 0 || x.microbatch >= m || placement[x.stage] != r ||
          x.stage / len != x.microbatch / per ||
          (comm_op[static_cast<int>(x.op)] && nb >= 0 && nb < S && nb / len != x.stage / len) ||
          (comm_op[static_cast<int>(x.op)] &&
           (nb < 0 || nb >= S || x.peer < 0 || x.peer >= p || x.peer != placement[nb] || x.peer == r)) ||
          (skip_op[static_cast<int>(x.op)] && (id = ix.skip_id(x)) < 0) ||
          *(slot =
                pos + (skip_op[static_cast<int>(x.op)] ? ix.skip_key(static_cast<int>(x.op), id, x.microbatch)
                                                       : (static_cast<std::size_t>(x.op) * static_cast<std::size_t>(S) +
                                                          static_cast<std::size_t>(x.stage)) *
                                                                 static_cast<std::size_t>(m) +
                                                             static_cast<std::size_t>(x.microbatch))) != 0 ||
          // an overlapped pair: an F marked overlapped, then directly its full B
          (x.overlapped &&
           (x.op != op_kind::forward || i + 1 >= n || prog[i + 1].op != op_kind::backward || prog[i + 1].overlapped)) ||
          (fo && backward_op[static_cast<int>(x.op)])) {
        const check_rule rule = fo && backward_op[static_cast<int>(x.op)] ? check_rule::backward_in_forward_only
                                : x.stage < 0 || x.stage >= S             ? check_rule::stage_out_of_range
                                : x.microbatch < 0 || x.microbatch >= m   ? check_rule::microbatch_out_of_range
                                : placement[x.stage] != r                 ? check_rule::wrong_rank
                                : x.stage / len != x.microbatch / per || (comm_op[static_cast<int>(x.op)] && nb >= 0 &&
                                                                          nb < S && nb / len != x.stage / len)
                                    ? check_rule::wrong_direction
                                : slot == nullptr && id >= 0 ? check_rule::wrong_peer
                                : slot == nullptr            ? check_rule::wrong_crossing
                                : *slot != 0                 ? check_rule::duplicate_op
                                                             : check_rule::overlap_pair;
        return {rule, r, i, x};
      }
      *slot = i + 1;
    }
  }
  // 2. every compute op once; dependencies in program order; sends and receives where needed.
  //    (Each op's position + 1 read through a pointer to its stage's row of the index, by
  //    microbatch: a call per lookup costs a constant evaluation steps, and g++ time and memory.)
  for (int s = 0; s < S; ++s) {
    const int r = t.rank_of(s);
    const bool has_prev = !chains.first(s), has_next = !chains.last(s);
    const int prev = has_prev ? t.rank_of(s - 1) : r;
    const int next = has_next ? t.rank_of(s + 1) : r;
    const int* f_at = pos + ix.key(op_kind::forward, s, 0);
    const int* b_at = pos + ix.key(op_kind::backward, s, 0);
    const int* i_at = pos + ix.key(op_kind::backward_input, s, 0);
    const int* w_at = pos + ix.key(op_kind::backward_weight, s, 0);
    const int* recv_f_at = pos + ix.key(op_kind::recv_forward, s, 0);
    const int* send_f_at = pos + ix.key(op_kind::send_forward, s, 0);
    const int* recv_b_at = pos + ix.key(op_kind::recv_backward, s, 0);
    const int* send_b_at = pos + ix.key(op_kind::send_backward, s, 0);
    // The neighbouring stages' F (before) and B and I (after), where they exist.
    const int* prev_f_at = has_prev ? pos + ix.key(op_kind::forward, s - 1, 0) : pos;
    const int* next_b_at = has_next ? pos + ix.key(op_kind::backward, s + 1, 0) : pos;
    const int* next_i_at = has_next ? pos + ix.key(op_kind::backward_input, s + 1, 0) : pos;
    for (int mb = chains.first_microbatch(s), end = mb + per; mb < end; ++mb) {
      const int f = f_at[mb] - 1, b = b_at[mb] - 1, in = i_at[mb] - 1, w = w_at[mb] - 1;
      if (f < 0) return {check_rule::missing_op, r, -1, make_compute(op_kind::forward, s, mb)};
      if (fo) {  // the forward's rules alone: the input before its F, the output sent after it
        if (has_prev && prev == r && prev_f_at[mb] - 1 > f)
          return {check_rule::dependency_order, r, f, make_compute(op_kind::forward, s, mb)};
        if (has_prev && prev != r)
          if (const int rv = recv_f_at[mb] - 1; rv < 0 || rv > f)
            return {check_rule::missing_receive, r, f, make_compute(op_kind::forward, s, mb)};
        if (has_next && next != r && send_f_at[mb] - 1 < f)
          return {check_rule::missing_send, r, f, make_compute(op_kind::forward, s, mb)};
        continue;
      }
      if (b >= 0 && (in >= 0 || w >= 0))
        return {check_rule::mixed_backward, r, in >= 0 ? in : w,
                make_compute(in >= 0 ? op_kind::backward_input : op_kind::backward_weight, s, mb)};
      if (b < 0 && in < 0)
        return {check_rule::missing_op, r, -1,
                make_compute(w >= 0 ? op_kind::backward_input : op_kind::backward, s, mb)};
      if (in >= 0 && w < 0) return {check_rule::missing_op, r, -1, make_compute(op_kind::backward_weight, s, mb)};
      const int bi = b >= 0 ? b : in;  // consumes the incoming gradient, produces the outgoing one
      const op_kind bk = b >= 0 ? op_kind::backward : op_kind::backward_input;
      if (bi < f) return {check_rule::dependency_order, r, bi, make_compute(bk, s, mb)};
      if (b == f + 1 && ix.data.data()[r][f].overlapped)  // a pair's B cannot need the pair's own F
        return {check_rule::overlap_pair, r, f, ix.data.data()[r][f]};
      if (w >= 0 && w < in) return {check_rule::dependency_order, r, w, make_compute(op_kind::backward_weight, s, mb)};
      if (has_prev && prev == r) {
        if (prev_f_at[mb] - 1 > f) return {check_rule::dependency_order, r, f, make_compute(op_kind::forward, s, mb)};
      } else if (has_prev) {
        const int rv = recv_f_at[mb] - 1;
        if (rv < 0 || rv > f) return {check_rule::missing_receive, r, f, make_compute(op_kind::forward, s, mb)};
        const int sb = send_b_at[mb] - 1;
        if (sb < bi) return {check_rule::missing_send, r, bi, make_compute(bk, s, mb)};
      }
      if (has_next && next == r) {
        const int nb = b >= 0 ? next_b_at[mb] - 1 : next_i_at[mb] - 1;
        if (nb > bi) return {check_rule::dependency_order, r, bi, make_compute(bk, s, mb)};
      } else if (has_next) {
        const int rv = recv_b_at[mb] - 1;
        if (rv < 0 || rv > bi) return {check_rule::missing_receive, r, bi, make_compute(bk, s, mb)};
        const int sf = send_f_at[mb] - 1;
        if (sf < f) return {check_rule::missing_send, r, f, make_compute(op_kind::forward, s, mb)};
      }
    }
  }
  // 2b. the skip messages of every crossing whose stages lie on different ranks: its value sent
  //     after the producer's F and received before the consumer's; its gradient sent after the
  //     consumer's B (or I) and received before the producer's. (On one rank, the chain's own
  //     order already puts the producer's F before the consumer's and its B after.)
  for (int c = 0; c < ix.chains; ++c) {
    for (int k = 0; k < ix.crossings; ++k) {
      const int a = c * len + ix.cross[k].from, b = c * len + ix.cross[k].to, ra = t.rank_of(a), rb = t.rank_of(b);
      if (ra == rb) continue;
      const int id = c * ix.crossings + k;
      for (int mb = c * per, end = mb + per; mb < end; ++mb) {
        const int fa = ix.at(op_kind::forward, a, mb), fb = ix.at(op_kind::forward, b, mb);
        const int ba = ix.at(op_kind::backward, a, mb) >= 0 ? ix.at(op_kind::backward, a, mb)
                                                            : ix.at(op_kind::backward_input, a, mb);
        const int bb = ix.at(op_kind::backward, b, mb) >= 0 ? ix.at(op_kind::backward, b, mb)
                                                            : ix.at(op_kind::backward_input, b, mb);
        const op_kind ka = ix.at(op_kind::backward, a, mb) >= 0 ? op_kind::backward : op_kind::backward_input;
        const op_kind kb = ix.at(op_kind::backward, b, mb) >= 0 ? op_kind::backward : op_kind::backward_input;
        if (ix.at_skip(op_kind::send_skip_forward, id, mb) < fa)
          return {check_rule::missing_send, ra, fa, make_compute(op_kind::forward, a, mb)};
        if (const int rv = ix.at_skip(op_kind::recv_skip_forward, id, mb); rv < 0 || rv > fb)
          return {check_rule::missing_receive, rb, fb, make_compute(op_kind::forward, b, mb)};
        if (fo) continue;  // no gradients
        if (ix.at_skip(op_kind::send_skip_backward, id, mb) < bb)
          return {check_rule::missing_send, rb, bb, make_compute(kb, b, mb)};
        if (const int rv = ix.at_skip(op_kind::recv_skip_backward, id, mb); rv < 0 || rv > ba)
          return {check_rule::missing_receive, ra, ba, make_compute(ka, a, mb)};
      }
    }
  }
  // 3. pairing: every comm op has its partner, and between two ranks the receives come in the
  //    order of the sends (so the k-th send pairs with the k-th receive). Activations and gradients
  //    travel on separate channels: Megatron's interleaved orders with a group larger than the
  //    ranks interleave the two differently on the two sides. Each crossing has a channel of its
  //    own in each direction.
  // Per channel: position + 1 of the last partner seen; (peer, kind) for neighbours' messages,
  // then (crossing, direction).
  buffer<int> last(2 * static_cast<std::size_t>(p) + 2 * static_cast<std::size_t>(ix.chains * ix.crossings));
  for (int r = 0; r < p; ++r) {
    const task* prog = ix.data.data()[r];
    const int n = ix.size.data()[r];
    last.fill(0);
    int* seen = last.data();
    for (int i = 0; i < n; ++i) {
      const task x = prog[i];
      if (comm_op[static_cast<int>(x.op)]) {
        const int z =
            pos[skip_op[static_cast<int>(x.op)]
                    ? ix.partner_key(x)
                    : (static_cast<std::size_t>(partner_op[static_cast<int>(x.op)]) * static_cast<std::size_t>(S) +
                       static_cast<std::size_t>(x.stage + partner_delta[static_cast<int>(x.op)])) *
                              static_cast<std::size_t>(m) +
                          static_cast<std::size_t>(x.microbatch)];  // partner's position + 1
        const int c = skip_op[static_cast<int>(x.op)]
                          ? 2 * p + 2 * ix.skip_id(x) + (x.op == op_kind::recv_skip_backward)
                          : 2 * x.peer + (x.op == op_kind::recv_backward);
        if (z == 0 || (recv_op[static_cast<int>(x.op)] && z < seen[c]))
          return {check_rule::unpaired_send_receive, r, i, x};
        seen[c] = recv_op[static_cast<int>(x.op)] ? z : seen[c];
      }
    }
  }
  // 4. deadlock: run it; where it sticks, report the op the lowest stuck rank waits at.
  if (!run) return {};
  buffer<int> pc(static_cast<std::size_t>(p));
  const int stuck = run_blocking(ix, pc, no_op{});
  return stuck >= 0 ? deadlock_at(ix, pc, stuck) : verification{};
}

}  // namespace detail

/// Checks every rule of a valid table and returns the first one broken (ok() when none is).
/// Order of checks: the crossings, ranges and placement, each op once, order within a rank, the
/// skip messages, send/receive pairing, deadlock.
template <table_like Table>
constexpr verification verify(const Table& t) {
  detail::table_index ix;
  return detail::verify_indexed(t, ix);
}

/// Run time: throws verification_error naming the rule, rank and position when `t` is invalid.
template <table_like Table>
void require_verified(const Table& t) {
  if (auto v = verify(t); !v.ok()) throw verification_error(v);
}

}  // namespace ctpipe
