// Verification: the rules every table must follow, checked by the same constexpr code at compile
// time and at run time. A failure names the rule, the rank and the position in that rank's program.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/schedule/table.hpp>

namespace ctpipe {

/// The rules of a valid table.
enum class check_rule : int {
  ok,
  stage_out_of_range,      // every task names a stage that exists
  microbatch_out_of_range, // every task names a microbatch that exists
  wrong_rank,              // each op runs on the rank that holds its stage
  duplicate_op,            // every op appears exactly once
  missing_op,              // every compute op appears exactly once (this one is missing)
  mixed_backward,          // a stage and microbatch use either B, or I and W; never both
  dependency_order,        // an op comes after the ops of its own rank that it depends on
  wrong_peer,              // a send or receive names the rank that holds the neighbouring stage
  missing_receive,         // an op whose input is on another rank is preceded by its receive
  missing_send,            // a value consumed on another rank is sent after it is produced
  unpaired_send_receive,   // sends and receives pair up in the same order between every two ranks
  deadlock,                // the table runs to completion under blocking receives
};

/// The rule in words a user can read.
constexpr std::string_view rule_text(check_rule r) {
  switch (r) {
    case check_rule::ok: return "ok";
    case check_rule::stage_out_of_range: return "every task must name a stage that exists";
    case check_rule::microbatch_out_of_range: return "every task must name a microbatch that exists";
    case check_rule::wrong_rank: return "each op must run on the rank that holds its stage";
    case check_rule::duplicate_op: return "every op must appear exactly once, and this one appears again";
    case check_rule::missing_op: return "every compute op must appear exactly once, and this one is missing";
    case check_rule::mixed_backward: return "a stage and microbatch must use either B, or I and W, never both";
    case check_rule::dependency_order: return "an op must come after the ops of its own rank that it depends on";
    case check_rule::wrong_peer:
      return "a send or receive must name the other rank that holds the neighbouring stage";
    case check_rule::missing_receive: return "an op whose input is on another rank must be preceded by its receive";
    case check_rule::missing_send: return "a value consumed on another rank must be sent after it is produced";
    case check_rule::unpaired_send_receive:
      return "sends and receives must pair up in the same order between every two ranks";
    case check_rule::deadlock: return "the table must run to completion, and here every rank left waits on a receive";
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

/// "F stage 2 mb 5" / "RECV_F stage 1 mb 3 from rank 0".
inline std::string describe(const task& t) {
  std::string s(op_name(t.op));
  s += " stage " + std::to_string(t.stage) + " mb " + std::to_string(t.microbatch);
  if (is_send(t.op)) s += " to rank " + std::to_string(t.peer);
  if (is_recv(t.op)) s += " from rank " + std::to_string(t.peer);
  return s;
}

/// One line: which rule, which rank, which position, which op.
inline std::string message(const verification& v) {
  if (v.ok()) return "ok";
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

// Where every op of a table is, and which send each receive pairs with (the k-th send from a to
// b pairs with the k-th receive on b from a). Built once, shared by verification and analysis.
struct comm_index {
  int ranks = 0;
  buffer<int> offset;  // offset[r] = global index of rank r's first op; offset[ranks] = total
  buffer<int> match;   // for a receive or send: the global index of its partner, or -1

  constexpr int global(int rank, int pos) const { return offset[static_cast<std::size_t>(rank)] + pos; }
  constexpr int rank_of_global(int g) const {
    int r = 0;
    while (offset[static_cast<std::size_t>(r + 1)] <= g) ++r;
    return r;
  }
};

template <table_like Table>
constexpr comm_index index_comm(const Table& t) {
  const int p = t.ranks();
  comm_index ix{p, buffer<int>(static_cast<std::size_t>(p) + 1), {}};
  for (int r = 0; r < p; ++r)
    ix.offset[static_cast<std::size_t>(r + 1)] = ix.offset[static_cast<std::size_t>(r)] + static_cast<int>(t.program(r).size());
  const auto total = static_cast<std::size_t>(ix.offset[static_cast<std::size_t>(p)]);
  ix.match = buffer<int>(total, -1);
  // Per channel (a -> b): how many sends, where they start in `sends`, then their global indices.
  const auto channels = static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
  buffer<int> count(channels, 0), start(channels + 1, 0), sends(total, -1), taken(channels, 0);
  for (int a = 0; a < p; ++a)
    for (const task& x : t.program(a))
      if (is_send(x.op) && x.peer >= 0 && x.peer < p) ++count[static_cast<std::size_t>(a * p + x.peer)];
  for (std::size_t c = 0; c < channels; ++c) start[c + 1] = start[c] + count[c];
  for (int a = 0; a < p; ++a) {
    auto prog = t.program(a);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      if (!is_send(x.op) || x.peer < 0 || x.peer >= p) continue;
      const auto c = static_cast<std::size_t>(a * p + x.peer);
      sends[static_cast<std::size_t>(start[c] + taken[c]++)] = ix.global(a, static_cast<int>(i));
    }
  }
  for (std::size_t c = 0; c < channels; ++c) taken[c] = 0;
  for (int b = 0; b < p; ++b) {
    auto prog = t.program(b);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      if (!is_recv(x.op) || x.peer < 0 || x.peer >= p) continue;
      const auto c = static_cast<std::size_t>(x.peer * p + b);
      if (taken[c] < count[c]) {
        const int s = sends[static_cast<std::size_t>(start[c] + taken[c]++)];
        const int g = ix.global(b, static_cast<int>(i));
        ix.match[static_cast<std::size_t>(g)] = s;
        ix.match[static_cast<std::size_t>(s)] = g;
      }
    }
  }
  return ix;
}

// Runs the table under blocking receives and buffered sends, calling `on_op(rank, pos, gi)` for
// every op in an order consistent with every dependency. Returns the rank stuck first (lowest
// rank among those left waiting), or -1 when every rank ran to its end.
template <table_like Table, class OnOp>
constexpr int run_blocking(const Table& t, const comm_index& ix, OnOp&& on_op) {
  const int p = t.ranks();
  buffer<int> pc(static_cast<std::size_t>(p), 0);
  buffer<bool> done(ix.match.size(), false);
  int finished = 0;
  for (int r = 0; r < p; ++r)
    if (t.program(r).empty()) ++finished;
  bool progress = true;
  while (progress && finished < p) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      auto prog = t.program(r);
      int i = pc[static_cast<std::size_t>(r)];
      if (i == static_cast<int>(prog.size())) continue;
      const int start = i;
      while (i < static_cast<int>(prog.size())) {
        const int g = ix.global(r, i);
        if (is_recv(prog[static_cast<std::size_t>(i)].op)) {
          const int s = ix.match[static_cast<std::size_t>(g)];
          if (s < 0 || !done[static_cast<std::size_t>(s)]) break;
        }
        on_op(r, i, g);
        done[static_cast<std::size_t>(g)] = true;
        ++i;
      }
      pc[static_cast<std::size_t>(r)] = i;
      if (i != start) progress = true;
      if (i == static_cast<int>(prog.size()) && i != start) ++finished;
    }
  }
  for (int r = 0; r < p; ++r)
    if (pc[static_cast<std::size_t>(r)] < static_cast<int>(t.program(r).size())) return r;
  return -1;
}

// The op a stage/microbatch's value comes from, in the flat (stage, microbatch) index space.
struct op_positions {
  // One slot per (kind, stage, microbatch): the position in its rank's program, or -1.
  buffer<int> pos;
  int stages = 0, microbatches = 0;
  constexpr int& at(op_kind k, int s, int mb) {
    return pos[(static_cast<std::size_t>(k) * static_cast<std::size_t>(stages) + static_cast<std::size_t>(s)) *
                   static_cast<std::size_t>(microbatches) +
               static_cast<std::size_t>(mb)];
  }
};

}  // namespace detail

/// Checks every rule of a valid table and returns the first one broken (ok() when none is).
/// Order of checks: ranges and placement, each op once, order within a rank, send/receive
/// pairing, deadlock.
template <table_like Table>
constexpr verification verify(const Table& t) {
  const int p = t.ranks(), S = t.stages(), m = t.microbatches();
  detail::op_positions at{detail::buffer<int>(static_cast<std::size_t>(op_kind_count) * static_cast<std::size_t>(S > 0 ? S : 0) *
                                                  static_cast<std::size_t>(m > 0 ? m : 0),
                                              -1),
                          S, m};
  // 1. ranges, placement, peers; every op at most once.
  for (int r = 0; r < p; ++r) {
    auto prog = t.program(r);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      const int pos = static_cast<int>(i);
      if (x.stage < 0 || x.stage >= S) return {check_rule::stage_out_of_range, r, pos, x};
      if (x.microbatch < 0 || x.microbatch >= m) return {check_rule::microbatch_out_of_range, r, pos, x};
      if (t.rank_of(x.stage) != r) return {check_rule::wrong_rank, r, pos, x};
      if (is_comm(x.op)) {
        // The neighbouring stage this value comes from or goes to.
        const bool toward_next = x.op == op_kind::send_forward || x.op == op_kind::recv_backward;
        const int nb = toward_next ? x.stage + 1 : x.stage - 1;
        if (nb < 0 || nb >= S || x.peer != t.rank_of(nb) || x.peer == r) return {check_rule::wrong_peer, r, pos, x};
      }
      int& slot = at.at(x.op, x.stage, x.microbatch);
      if (slot >= 0) return {check_rule::duplicate_op, r, pos, x};
      slot = pos;
    }
  }
  // 2. every compute op present once; dependencies in program order; sends and receives present.
  for (int s = 0; s < S; ++s) {
    const int r = t.rank_of(s);
    for (int mb = 0; mb < m; ++mb) {
      const int f = at.at(op_kind::forward, s, mb);
      const int b = at.at(op_kind::backward, s, mb);
      const int in = at.at(op_kind::backward_input, s, mb);
      const int w = at.at(op_kind::backward_weight, s, mb);
      if (f < 0) return {check_rule::missing_op, r, -1, make_compute(op_kind::forward, s, mb)};
      if (b >= 0 && (in >= 0 || w >= 0))
        return {check_rule::mixed_backward, r, in >= 0 ? in : w,
                make_compute(in >= 0 ? op_kind::backward_input : op_kind::backward_weight, s, mb)};
      if (b < 0 && in < 0) {
        const op_kind missing = w >= 0 ? op_kind::backward_input : op_kind::backward;
        return {check_rule::missing_op, r, -1, make_compute(missing, s, mb)};
      }
      if (in >= 0 && w < 0) return {check_rule::missing_op, r, -1, make_compute(op_kind::backward_weight, s, mb)};
      const int bi = b >= 0 ? b : in;  // the op that consumes the gradient and produces the next
      const op_kind bk = b >= 0 ? op_kind::backward : op_kind::backward_input;
      if (bi < f) return {check_rule::dependency_order, r, bi, make_compute(bk, s, mb)};
      if (w >= 0 && w < in) return {check_rule::dependency_order, r, w, make_compute(op_kind::backward_weight, s, mb)};
      // Forward input from stage s-1.
      if (s > 0) {
        const int pr = t.rank_of(s - 1);
        if (pr == r) {
          const int pf = at.at(op_kind::forward, s - 1, mb);
          if (pf > f) return {check_rule::dependency_order, r, f, make_compute(op_kind::forward, s, mb)};
        } else {
          const int rv = at.at(op_kind::recv_forward, s, mb);
          if (rv < 0 || rv > f) return {check_rule::missing_receive, r, f, make_compute(op_kind::forward, s, mb)};
        }
      }
      // Gradient input from stage s+1.
      if (s + 1 < S) {
        const int nr = t.rank_of(s + 1);
        if (nr == r) {
          const int nb = at.at(op_kind::backward, s + 1, mb) >= 0 ? at.at(op_kind::backward, s + 1, mb)
                                                                   : at.at(op_kind::backward_input, s + 1, mb);
          if (nb > bi) return {check_rule::dependency_order, r, bi, make_compute(bk, s, mb)};
        } else {
          const int rv = at.at(op_kind::recv_backward, s, mb);
          if (rv < 0 || rv > bi) return {check_rule::missing_receive, r, bi, make_compute(bk, s, mb)};
          const int sf = at.at(op_kind::send_forward, s, mb);
          if (sf < 0 || sf < f) return {check_rule::missing_send, r, f, make_compute(op_kind::forward, s, mb)};
        }
      }
      if (s > 0 && t.rank_of(s - 1) != r) {
        const int sb = at.at(op_kind::send_backward, s, mb);
        if (sb < 0 || sb < bi) return {check_rule::missing_send, r, bi, make_compute(bk, s, mb)};
      }
    }
  }
  // 3. pairing: the k-th send from a to b carries the value of the k-th receive on b from a.
  const detail::comm_index ix = detail::index_comm(t);
  for (int b = 0; b < p; ++b) {
    auto prog = t.program(b);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      if (!is_recv(x.op) && !is_send(x.op)) continue;
      const int g = ix.global(b, static_cast<int>(i));
      const int partner = ix.match[static_cast<std::size_t>(g)];
      if (partner < 0) return {check_rule::unpaired_send_receive, b, static_cast<int>(i), x};
      if (is_send(x.op)) continue;
      const int a = ix.rank_of_global(partner);
      const task& y = t.program(a)[static_cast<std::size_t>(partner - ix.global(a, 0))];
      const bool same_value = x.op == op_kind::recv_forward
                                  ? (y.op == op_kind::send_forward && y.stage + 1 == x.stage)
                                  : (y.op == op_kind::send_backward && y.stage - 1 == x.stage);
      if (!same_value || y.microbatch != x.microbatch)
        return {check_rule::unpaired_send_receive, b, static_cast<int>(i), x};
    }
  }
  // 4. deadlock: run it; where it sticks, report the first op the lowest stuck rank waits at.
  detail::buffer<bool> done(ix.match.size(), false);
  const int stuck = detail::run_blocking(t, ix, [&](int, int, int g) { done[static_cast<std::size_t>(g)] = true; });
  if (stuck >= 0) {
    auto prog = t.program(stuck);
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (!done[static_cast<std::size_t>(ix.global(stuck, static_cast<int>(i)))])
        return {check_rule::deadlock, stuck, static_cast<int>(i), prog[i]};
  }
  return {};
}

/// Run time: throws verification_error naming the rule, rank and position when `t` is invalid.
template <table_like Table>
void require_verified(const Table& t) {
  if (auto v = verify(t); !v.ok()) throw verification_error(v);
}

}  // namespace ctpipe
