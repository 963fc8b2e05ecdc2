// The issue plan of the CUDA executor, computed at compile time from an execution plan and a
// placement of ranks on devices: how each stage boundary passes tensors (a pointer, a slot on the
// same stream, a ring written in place, a ring filled by a peer copy), the events every cross-rank
// dependency needs, and one global order in which a single host thread issues every rank's tasks.
// Plain constexpr: no CUDA header, so it is tested (static_assert) where CUDA is absent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/buffer.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/plan.hpp>

namespace ctpipe::cuda {

/// Which CUDA device each rank runs on. Several ranks may share a device (each has its own stream).
template <std::size_t Ranks>
struct placement {
  std::array<int, Ranks> device{};
  constexpr bool operator==(const placement&) const = default;
};
/// Every rank on device `d` (the single-GPU case: ranks overlap on separate streams).
template <std::size_t Ranks>
constexpr placement<Ranks> one_device(int d = 0) {
  placement<Ranks> p{};
  p.device.fill(d);
  return p;
}
/// Rank r on device r.
template <std::size_t Ranks>
constexpr placement<Ranks> device_per_rank() {
  placement<Ranks> p{};
  for (std::size_t r = 0; r < Ranks; ++r) p.device[r] = static_cast<int>(r);
  return p;
}

/// How a stage boundary hands a tensor over, per direction.
enum class handoff : std::uint8_t {
  none,         // no boundary (stage 0's input, the last stage's gradient)
  pointer,      // forward on one device: the consumer reads the producer's stash slot in place
  stash_copy,   // forward on one device with split backward: the consumer's F copies the producer's
                // output into its own stash (the producer may reuse its slot before the consumer's W)
  local_slot,   // backward on one rank: the producer writes a same-rank slot, the consumer reads it
  ring_direct,  // backward across ranks on one device: the producer writes the consumer's ring slot
  ring_copy,    // across devices: the producer's tensor is peer-copied into the consumer's ring
};

namespace detail {

/// A task's run-time arguments on this executor: the host plan's, plus the producer's stash slot
/// (forward by pointer) and the ordinal of the message a backward writes in place.
struct device_args {
  int microbatch = 0;
  int stash = -1, local_in = -1, local_out = -1, message = -1;
  int peer_stash = -1;   // F reading its input by pointer: the slot of stage - 1's stash holding it
  int out_message = -1;  // B or I of a stage > 0: ordinal of the gradient it sends to stage - 1
  int pair = 0;          // 1: the F of an overlapped pair F&B (forks the rank's second stream); 2: its B
  constexpr bool operator==(const device_args&) const = default;
};

/// One task in the global issue order: rank `rank`'s task number `index`.
struct issue_entry {
  int rank = 0;
  int index = 0;
  constexpr bool operator==(const issue_entry&) const = default;
};

}  // namespace detail
}  // namespace ctpipe::cuda

namespace ctpipe::cuda {

/// Everything the executor derives from the table and the placement. Event indices: per boundary
/// b, sent_forward[b] + k is the event recorded when message k has been sent forward across b (and
/// so on); -1 where the boundary does not need that kind. Then one fork event and a join per rank;
/// where the table has overlapped pairs F&B, a pair fork and a pair join per rank (the B of a pair
/// runs on a second stream of its rank, forked before the pair and joined after it).
///
/// A graph model (not a chain; Graph) has, besides the boundaries, a link per crossing k (a skip
/// message from stage skips[k].from to stage skips[k].to, as ExecPlan routes it) with hand-offs and
/// events of its own, and every message is a copy: a consumer's F copies what it receives into its
/// stash (stash_of gives the producer's slot where it reads it there).
template <std::size_t Ranks, std::size_t Stages, std::size_t Capacity, std::size_t Total, std::size_t Crossings = 0,
          std::size_t Microbatches = 0>
struct issue_plan {
  std::array<int, Ranks> device{};
  std::array<handoff, Stages> forward{};   // forward[b]: boundary b (stage b -> b + 1); index S-1 unused
  std::array<handoff, Stages> backward{};  // backward[b]: boundary b (stage b + 1 -> b)
  std::array<int, Stages> capacity{};      // ring slots of boundary b (both directions), 0 without ring
  std::array<int, Stages> sent_forward{}, consumed_forward{}, sent_backward{}, consumed_backward{};
  int fork_event = 0, join_event = 0, pair_fork_event = -1, pair_join_event = -1, events = 0;
  bool pairs = false;  // the table has overlapped pairs: each rank gets a second stream
  std::array<std::array<detail::device_args, Capacity>, Ranks> args{};
  std::array<detail::issue_entry, Total> order{};
  std::array<bool, Total> switch_device{};  // the entry runs on another device than the one before
  bool multi_device = false;
  // Graph models: crossing k's hand-offs, ring slots and events (as a boundary's), and per (stage,
  // microbatch) the stash slot its F fills.
  std::array<handoff, Crossings> skip_forward{}, skip_backward{};
  std::array<int, Crossings> skip_capacity{}, skip_sent_forward{}, skip_consumed_forward{}, skip_sent_backward{},
      skip_consumed_backward{};
  std::array<std::array<int, Microbatches>, Stages> stash_of{};
};

namespace detail {

template <auto ExecPlan>
consteval std::size_t total_tasks() {
  std::size_t n = 0;
  for (int l : ExecPlan.table.length) n += static_cast<std::size_t>(l);
  return n;
}

// A label for NVTX and for error messages: "F s3 mb5", "SEND_B s2 mb0".
struct label {
  std::array<char, 32> text{};
};
constexpr label make_label(const task& t) {
  label l{};
  std::size_t n = 0;
  for (char c : op_name(t.op)) l.text[n++] = c;
  const auto number = [&](char prefix1, char prefix2, int v) {
    l.text[n++] = ' ';
    l.text[n++] = prefix1;
    if (prefix2) l.text[n++] = prefix2;
    char digits[12]{};
    int k = 0;
    do digits[k++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) > 0);
    while (k > 0) l.text[n++] = digits[--k];
  };
  number('s', 0, t.stage);
  number('m', 'b', t.microbatch);
  return l;
}

}  // namespace detail

namespace detail::issue_order_failed {
// Reached only in a failing constant evaluation of make_issue_plan (as ctpipe::detail::check_failed: the
// function's name is the error). A verified table never gets here: its dependencies have an order.
inline void the_tables_dependencies_form_a_cycle() {}  // not constexpr: stops constant evaluation
}  // namespace detail::issue_order_failed

/// Builds the issue plan of execution plan `ExecPlan` on placement `Devices` (std::array<int, ranks>).
/// The global order is a round robin over the ranks, taking each rank's next task as soon as every
/// event it waits on has been recorded earlier in the order (a topological order of the step).
template <auto ExecPlan, auto Devices, bool Graph = false>
consteval auto make_issue_plan() {
  constexpr auto& t = ExecPlan.table;
  constexpr std::size_t R = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_ranks,
                        S = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_stages,
                        C = CTPIPE_NTTP_TYPE(ExecPlan.table)::capacity, N = detail::total_tasks<ExecPlan>(),
                        K = ExecPlan.skips.size(),
                        M = Graph ? static_cast<std::size_t>(ExecPlan.table.microbatches()) : 0;
  issue_plan<R, S, C, N, K, M> ip{};
  const int crossings = static_cast<int>(K);  // (as int: nvcc warns of an unsigned compared with a zero K)
  ip.device = Devices;
  const int m = t.microbatches();
  const auto dev_of_stage = [&](int s) {
    return Devices[static_cast<std::size_t>(t.stage_rank[static_cast<std::size_t>(s)])];
  };
  for (std::size_t r = 1; r < R; ++r) ip.multi_device = ip.multi_device || Devices[r] != Devices[0];

  // Hand-offs and events.
  int events = 0;
  // (A bidirectional table's two chains meet at no boundary: the end of one is no boundary.)
  const auto chain_end = [&](int s) { return (s + 1) % ExecPlan.chain_length == 0; };
  for (std::size_t b = 0; b < S; ++b) {
    ip.sent_forward[b] = ip.consumed_forward[b] = ip.sent_backward[b] = ip.consumed_backward[b] = -1;
    if (b + 1 >= S || chain_end(static_cast<int>(b))) continue;
    const int s = static_cast<int>(b);
    const bool same_rank = t.stage_rank[b] == t.stage_rank[b + 1];
    const bool same_device = dev_of_stage(s) == dev_of_stage(s + 1);
    // (A forward-only table keeps no slot until a backward: the producer's slot may be written
    // again before another rank's stream has read it, so a message across ranks is always copied.)
    ip.forward[b] = !same_device || (ExecPlan.forward_only && !same_rank) ? handoff::ring_copy
                    : (ExecPlan.split_backward || Graph)                  ? handoff::stash_copy
                                                                          : handoff::pointer;
    ip.backward[b] = same_rank ? handoff::local_slot : same_device ? handoff::ring_direct : handoff::ring_copy;
    if (same_rank) continue;
    const int cap = ExecPlan.channel_capacity[b];
    ip.capacity[b] = cap;
    const int reuse = m > cap ? m - cap : 0;  // messages whose slot is written again later in the step
    ip.sent_forward[b] = events, events += m;
    if (ip.forward[b] == handoff::ring_copy) ip.consumed_forward[b] = events, events += reuse;
    ip.sent_backward[b] = events, events += m;
    ip.consumed_backward[b] = events, events += reuse;
  }
  for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k) {
    const skip_route& route = ExecPlan.skips[k];
    const bool same_device = dev_of_stage(route.from) == dev_of_stage(route.to);
    ip.skip_forward[k] =
        same_device && !(ExecPlan.forward_only && route.remote) ? handoff::stash_copy : handoff::ring_copy;
    ip.skip_backward[k] = !route.remote ? handoff::local_slot : same_device ? handoff::ring_direct : handoff::ring_copy;
    ip.skip_sent_forward[k] = ip.skip_consumed_forward[k] = ip.skip_sent_backward[k] = ip.skip_consumed_backward[k] =
        -1;
    if (!route.remote) continue;
    const int cap = route.capacity;
    ip.skip_capacity[k] = cap;
    const int reuse = m > cap ? m - cap : 0;
    ip.skip_sent_forward[k] = events, events += m;
    if (ip.skip_forward[k] == handoff::ring_copy) ip.skip_consumed_forward[k] = events, events += reuse;
    ip.skip_sent_backward[k] = events, events += m;
    ip.skip_consumed_backward[k] = events, events += reuse;
  }
  ip.fork_event = events++;
  ip.join_event = events, events += static_cast<int>(R);
  for (std::size_t r = 0; r < R; ++r)
    for (int i = 0; i < t.length[r]; ++i) ip.pairs = ip.pairs || t.programs[r][static_cast<std::size_t>(i)].overlapped;
  if (ip.pairs) {
    ip.pair_fork_event = events, events += static_cast<int>(R);
    ip.pair_join_event = events, events += static_cast<int>(R);
  }
  ip.events = events;

  // Arguments: the host plan's slots, the producer's stash slot for F by pointer, and the ordinal
  // of the gradient each B sends (B ops of a stage send in their program order).
  ctpipe::detail::buffer<int> stash_of(S * static_cast<std::size_t>(m), -1);
  for (std::size_t r = 0; r < R; ++r)
    for (int i = 0; i < t.length[r]; ++i) {
      const task& x = t.programs[r][static_cast<std::size_t>(i)];
      if (x.op == op_kind::forward)
        stash_of.data()[static_cast<std::size_t>(x.stage) * static_cast<std::size_t>(m) +
                        static_cast<std::size_t>(x.microbatch)] = ExecPlan.slots[r][static_cast<std::size_t>(i)].stash;
    }
  if constexpr (Graph)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t i = 0; i < M; ++i) ip.stash_of[s][i] = stash_of.data()[s * M + i];
  for (std::size_t r = 0; r < R; ++r) {
    std::array<int, S> sent_b{};
    for (int i = 0; i < t.length[r]; ++i) {
      const task& x = t.programs[r][static_cast<std::size_t>(i)];
      const task_slots& ts = ExecPlan.slots[r][static_cast<std::size_t>(i)];
      detail::device_args& a = ip.args[r][static_cast<std::size_t>(i)];
      a = {x.microbatch, ts.stash, ts.local_in, ts.local_out, ts.message, -1, -1, 0};
      if (x.op == op_kind::forward && x.stage > 0 && !chain_end(x.stage - 1) &&
          (ip.forward[static_cast<std::size_t>(x.stage - 1)] == handoff::pointer ||
           ip.forward[static_cast<std::size_t>(x.stage - 1)] == handoff::stash_copy))
        a.peer_stash = stash_of.data()[static_cast<std::size_t>(x.stage - 1) * static_cast<std::size_t>(m) +
                                       static_cast<std::size_t>(x.microbatch)];
      if ((x.op == op_kind::backward || x.op == op_kind::backward_input) && x.stage > 0 && !chain_end(x.stage - 1))
        a.out_message = sent_b[static_cast<std::size_t>(x.stage)]++;
      // A pair F&B: the overlapped F, and the B right after it (lowering keeps the two adjacent).
      if (x.overlapped) a.pair = 1;
      if (i > 0 && t.programs[r][static_cast<std::size_t>(i - 1)].overlapped) a.pair = 2;
    }
  }

  // The global order. Counters per boundary and per crossing: messages sent / consumed so far in
  // the order.
  std::array<int, S> sent_f{}, used_f{}, sent_b{}, used_b{};
  std::array<int, K> skip_sent_f{}, skip_used_f{}, skip_sent_b{}, skip_used_b{};
  const auto crossing_of = [&](int from, int to) {
    std::size_t k = 0;
    while (static_cast<int>(k) < crossings && !(ExecPlan.skips[k].from == from && ExecPlan.skips[k].to == to)) ++k;
    return k;
  };
  const auto skip_at = [&](const auto& at, std::size_t k, int mb) {
    return at[k * static_cast<std::size_t>(m) + static_cast<std::size_t>(mb)];
  };
  // A ring slot written in place is free: message n of a ring of `cap` slots, `used` consumed.
  const auto free_slot = [](int n, int cap, int used) { return n < cap || used > n - cap; };
  std::array<int, R> next{};
  std::size_t placed = 0;
  int last_device = Devices[0];
  while (placed < N) {
    bool progress = false;
    for (std::size_t r = 0; r < R; ++r) {
      if (next[r] >= t.length[r]) continue;
      const task& x = t.programs[r][static_cast<std::size_t>(next[r])];
      const detail::device_args& a = ip.args[r][static_cast<std::size_t>(next[r])];
      const auto s = static_cast<std::size_t>(x.stage);
      bool ready = true;
      switch (x.op) {
        case op_kind::recv_forward:
          ready = sent_f[s - 1] > a.message;
          break;
        case op_kind::recv_backward:
          ready = sent_b[s] > a.message;
          break;
        case op_kind::send_forward:
          ready = ip.forward[s] != handoff::ring_copy || a.message < ip.capacity[s] ||
                  used_f[s] > a.message - ip.capacity[s];
          break;
        case op_kind::send_backward:
          ready = ip.backward[s - 1] != handoff::ring_copy || a.message < ip.capacity[s - 1] ||
                  used_b[s - 1] > a.message - ip.capacity[s - 1];
          break;
        case op_kind::backward:
        case op_kind::backward_input:
          ready = s == 0 || ip.backward[s - 1] != handoff::ring_direct ||
                  free_slot(a.out_message, ip.capacity[s - 1], used_b[s - 1]);
          // (A graph's B or I writes each crossing's gradient it sends in place too.)
          for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
            if (ExecPlan.skips[k].to == x.stage && ip.skip_backward[k] == handoff::ring_direct)
              ready = ready && free_slot(a.out_message, ip.skip_capacity[k], skip_used_b[k]);
          break;
        case op_kind::send_skip_forward: {
          const std::size_t k = crossing_of(x.stage, x.other);
          ready = ip.skip_forward[k] != handoff::ring_copy || free_slot(a.message, ip.skip_capacity[k], skip_used_f[k]);
          break;
        }
        case op_kind::recv_skip_forward:
          ready = skip_sent_f[crossing_of(x.other, x.stage)] > a.message;
          break;
        case op_kind::send_skip_backward: {
          const std::size_t k = crossing_of(x.other, x.stage);
          ready =
              ip.skip_backward[k] != handoff::ring_copy || free_slot(a.message, ip.skip_capacity[k], skip_used_b[k]);
          break;
        }
        case op_kind::recv_skip_backward:
          ready = skip_sent_b[crossing_of(x.stage, x.other)] > a.message;
          break;
        default:
          break;
      }
      if (!ready) continue;
      switch (x.op) {
        case op_kind::send_forward:
          ++sent_f[s];
          break;
        case op_kind::send_backward:
          ++sent_b[s - 1];
          break;
        case op_kind::forward:
          if (s > 0 && ip.forward[s - 1] == handoff::ring_copy) ++used_f[s - 1];
          for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
            if (ExecPlan.skips[k].to == x.stage && ip.skip_forward[k] == handoff::ring_copy &&
                skip_at(ExecPlan.skip_value_at, k, x.microbatch) >= skip_used_f[k])
              skip_used_f[k] = skip_at(ExecPlan.skip_value_at, k, x.microbatch) + 1;
          break;
        case op_kind::backward:
        case op_kind::backward_input:
          if (s + 1 < S && (ip.backward[s] == handoff::ring_direct || ip.backward[s] == handoff::ring_copy))
            ++used_b[s];
          for (std::size_t k = 0; static_cast<int>(k) < crossings; ++k)
            if (ExecPlan.skips[k].from == x.stage && ExecPlan.skips[k].remote &&
                skip_at(ExecPlan.skip_gradient_at, k, x.microbatch) >= skip_used_b[k])
              skip_used_b[k] = skip_at(ExecPlan.skip_gradient_at, k, x.microbatch) + 1;
          break;
        case op_kind::send_skip_forward:
          ++skip_sent_f[crossing_of(x.stage, x.other)];
          break;
        case op_kind::send_skip_backward:
          ++skip_sent_b[crossing_of(x.other, x.stage)];
          break;
        default:
          break;
      }
      ip.order[placed] = {static_cast<int>(r), next[r]++};
      ip.switch_device[placed] = Devices[r] != last_device;
      last_device = Devices[r];
      ++placed;
      progress = true;
    }
    if (!progress) detail::issue_order_failed::the_tables_dependencies_form_a_cycle();  // stops the compiler here
  }
  return ip;
}

}  // namespace ctpipe::cuda
