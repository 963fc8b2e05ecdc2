// Analysis: simulate a verified table under a cost model (makespan, busy and idle time, bubble
// fraction), and plan its memory (peak live activations, buffer slots by liveness, the capacity
// every rank-to-rank channel needs). Plain constexpr: the same code at compile time and run time.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include <ctpipe/analysis/verify.hpp>
#include <ctpipe/detail/slot_pools.hpp>

namespace ctpipe {

/// Uniform per-op costs (every stage alike) and a per-message latency. For schedules with several
/// stages per rank these are the costs of one stage (one chunk).
struct cost_model {
  double forward = 1.0;
  double backward = 2.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  double comm = 0.0;      // time from a send until its receive can complete (cross-rank edges only)
  double overlap = -1.0;  // an overlapped pair F&B; below 0: forward + backward (no overlap gain)

  /// The cost of an overlapped pair: its own figure where one is given.
  constexpr double pair(const task& f, const task& b) const {
    return overlap >= 0.0 ? overlap : (*this)(f) + (*this)(b);
  }

  constexpr double operator()(const task& t) const {
    switch (t.op) {
      case op_kind::forward:
        return forward;
      case op_kind::backward:
        return backward;
      case op_kind::backward_input:
        return backward_input;
      case op_kind::backward_weight:
        return backward_weight;
      default:
        return 0.0;
    }
  }
};

/// Per-stage costs for `Stages` stages (for interleaved: per chunk-stage).
template <std::size_t Stages>
struct stage_costs {
  std::array<double, Stages> forward{}, backward{}, backward_input{}, backward_weight{};
  double comm = 0.0;
  double overlap_ratio = 1.0;  // an overlapped pair F&B costs this much of its forward plus backward

  constexpr double pair(const task& f, const task& b) const { return overlap_ratio * ((*this)(f) + (*this)(b)); }

  constexpr double operator()(const task& t) const {
    const auto s = static_cast<std::size_t>(t.stage);
    switch (t.op) {
      case op_kind::forward:
        return forward[s];
      case op_kind::backward:
        return backward[s];
      case op_kind::backward_input:
        return backward_input[s];
      case op_kind::backward_weight:
        return backward_weight[s];
      default:
        return 0.0;
    }
  }
};

/// A cost model: the cost of a task, and a `comm` latency per message; optionally pair(f, b), the
/// cost of an overlapped pair F&B (forward plus backward where it has none), and message(send), the
/// time of one message (`comm` where it has none).
template <class C>
concept cost_function = requires(const C& c, const task& t) {
  { c(t) } -> std::convertible_to<double>;
  { c.comm } -> std::convertible_to<double>;
};

namespace detail {
template <cost_function C>
constexpr double pair_cost(const C& c, const task& f, const task& b) {
  if constexpr (requires {
                  { c.pair(f, b) } -> std::convertible_to<double>;
                })
    return static_cast<double>(c.pair(f, b));
  else
    return static_cast<double>(c(f)) + static_cast<double>(c(b));
}
// Does the model price each message (message(send)), or take its comm latency for all?
template <class C>
concept prices_messages = requires(const C& c, const task& x) {
  { c.message(x) } -> std::convertible_to<double>;
};
// The time from send `x` until its receive can complete: the model's message(x) where it has one
// (messages of different sizes), its comm latency otherwise.
template <cost_function C>
constexpr double message_cost(const C& c, const task& x) {
  if constexpr (prices_messages<C>)
    return static_cast<double>(c.message(x));
  else
    return static_cast<double>(c.comm);
}
}  // namespace detail

namespace detail {
template <class T, std::size_t N>
struct rank_array_for {
  using type = std::array<T, N>;
  static constexpr type make(std::size_t) { return type{}; }
};
template <class T>
struct rank_array_for<T, std::dynamic_extent> {
  using type = std::vector<T>;
  static type make(std::size_t n) { return type(n); }
};
// Tables with run-time sizes built and analysed within one constant evaluation (the planner's):
// their figures live in detail::buffer, which clang 14 evaluates where it does not std::vector.
inline constexpr std::size_t transient_extent = std::dynamic_extent - 1;
template <class T>
struct rank_array_for<T, transient_extent> {
  using type = buffer<T>;
  static constexpr type make(std::size_t n) { return type(n); }
};
constexpr std::size_t squared(std::size_t n) { return n == std::dynamic_extent || n == transient_extent ? n : n * n; }
}  // namespace detail

/// std::array<T, N> for tables with a static rank count, std::vector<T> otherwise.
template <class T, std::size_t N>
using rank_array = typename detail::rank_array_for<T, N>::type;

/// Timing of one step under a cost model. Two views of time: the global makespan (a step ending in
/// a global synchronisation) and each rank's span, from its first compute op's start to its last
/// one's end (the Zero Bubble paper's view: without a cross-stage synchronisation, each rank's work
/// tiles across steps).
template <std::size_t Ranks>
struct timing {
  double makespan = 0.0;         // the last op's end over all ranks
  double bubble_fraction = 0.0;  // 1 - total busy / (ranks x makespan)
  double bubble_rate = 0.0;      // the Zero Bubble paper's: (max span - max busy) / max span
  rank_array<double, Ranks> busy{};
  rank_array<double, Ranks> idle{};    // makespan - busy
  rank_array<double, Ranks> span{};    // last compute end - first compute start
  rank_array<double, Ranks> bubble{};  // span - busy: the rank's own idle time within its span

  constexpr double max_span() const {
    double m = 0.0;
    for (double x : span) m = x > m ? x : m;
    return m;
  }
  constexpr double max_bubble() const {
    double m = 0.0;
    for (double x : bubble) m = x > m ? x : m;
    return m;
  }
};

/// Memory of one step.
template <std::size_t Ranks>
struct memory_plan {
  rank_array<int, Ranks> peak_live{};  // activations held at once (+1 at F, -1 at B, or at W when split)
  // Where the held activations peak, how many of them await their I (or B), and how many have had
  // their I and await their W (the Zero Bubble paper's M_I and M_W counts; of the moments at the
  // peak, the one with the most awaiting I). held = awaiting input + awaiting weight.
  rank_array<int, Ranks> peak_awaiting_input{};
  rank_array<int, Ranks> peak_awaiting_weight{};
  rank_array<int, Ranks> activation_slots{};                   // buffers for stashed activations, reused by liveness
  rank_array<int, Ranks> gradient_slots{};                     // buffers for received gradients, reused by liveness
  rank_array<int, detail::squared(Ranks)> channel_capacity{};  // [from * ranks + to]: messages in flight at most
  // Buffers for what skip messages bring (reused by liveness): values received for a later stage,
  // held until its B (or W); gradients received back, held until the producer's B (or I).
  rank_array<int, Ranks> skip_value_slots{};
  rank_array<int, Ranks> skip_gradient_slots{};

  constexpr int capacity(int from, int to) const {
    const auto p = static_cast<std::size_t>(peak_live.size());
    return channel_capacity[static_cast<std::size_t>(from) * p + static_cast<std::size_t>(to)];
  }
};

/// Everything analyse() measures.
template <std::size_t Ranks>
struct report : timing<Ranks>, memory_plan<Ranks> {};

/// Which pool a buffer slot belongs to.
enum class slot_pool : int { activation, gradient, skip_value, skip_gradient };

namespace detail {

template <table_like Table, class T>
constexpr auto make_rank_array(const Table& t) {
  return rank_array_for<T, Table::static_ranks>::make(static_cast<std::size_t>(t.ranks()));
}
template <table_like Table, class T>
constexpr auto make_square_array(const Table& t) {
  return rank_array_for<T, squared(Table::static_ranks)>::make(static_cast<std::size_t>(t.ranks()) *
                                                               static_cast<std::size_t>(t.ranks()));
}

// Where `v` is a broken rule: at compile time stops at check_failed::<rule>, at run time throws.
constexpr void throw_if_broken(const verification& v) {
  if (v.ok()) return;
  stop_constant_evaluation(v);
  throw verification_error(v);
}

// Verifies once and keeps the position index for the analysis passes. `run` false leaves the
// deadlock rule to simulate_indexed, which runs the table anyway (once, not twice).
template <table_like Table>
constexpr table_index index_or_throw(const Table& t, bool run = true) {
  table_index ix;
  throw_if_broken(verify_indexed(t, ix, run));
  return ix;
}

template <table_like Table, cost_function Costs, class OnTask>
constexpr timing<Table::static_ranks> simulate_indexed(const Table& t, const table_index& ix, const Costs& costs,
                                                       OnTask&& on_task) {
  const int p = t.ranks();
  buffer<double> sent(ix.pos.size());  // per send (by its value key): when it was sent
  buffer<double> clocks(static_cast<std::size_t>(p));
  buffer<double> busy(static_cast<std::size_t>(p));
  buffer<int> pc(static_cast<std::size_t>(p));
  double* sent_at = sent.data();
  double* clock = clocks.data();
  double* busy_at = busy.data();
  const auto S = static_cast<std::size_t>(ix.stages), M = static_cast<std::size_t>(ix.microbatches);
  timing<Table::static_ranks> out{0.0,
                                  0.0,
                                  0.0,
                                  make_rank_array<Table, double>(t),
                                  make_rank_array<Table, double>(t),
                                  make_rank_array<Table, double>(t),
                                  make_rank_array<Table, double>(t)};
  buffer<double> first_start(static_cast<std::size_t>(p), -1.0);
  double* first = first_start.data();
  const task* const* programs = ix.data.data();
  const int stuck = run_blocking(ix, pc, [&](int r, int i, const task& x) {
    const double start = clock[r];
    const int k = static_cast<int>(x.op);
    // A receive waits for its send (plus latency); a send stamps its time; compute ops take their
    // cost; an overlapped pair F&B takes its own cost on its first half, and none on its second.
    const double ready = recv_op[k] ? sent_at[skip_op[k] ? ix.partner_key(x)
                                                         : (static_cast<std::size_t>(partner_op[k]) * S +
                                                            static_cast<std::size_t>(x.stage + partner_delta[k])) *
                                                                   M +
                                                               static_cast<std::size_t>(x.microbatch)]
                                    : start;
    const double d = comm_op[k] || (i > 0 && programs[r][i - 1].overlapped) ? 0.0
                     : x.overlapped                                         ? pair_cost(costs, x, programs[r][i + 1])
                                                                            : static_cast<double>(costs(x));
    const double begin = ready > start ? ready : start;
    clock[r] = begin + d;
    busy_at[r] += d;
    first[r] = first[r] < 0.0 && !comm_op[k] ? begin : first[r];  // the span starts at the first compute op
    // When its receive can complete. (One statement, and no call for a model without message():
    // each statement and call costs constant-evaluation steps, and clang 14's budget is tight:
    // tests/budget_cx.cpp.)
    if (send_op[k])
      sent_at[skip_op[k] ? ix.own_key(x)
                         : (static_cast<std::size_t>(k) * S + static_cast<std::size_t>(x.stage)) * M +
                               static_cast<std::size_t>(x.microbatch)] =
          start + (prices_messages<Costs> ? message_cost(costs, x) : static_cast<double>(costs.comm));
    if constexpr (!std::is_same_v<std::remove_cvref_t<OnTask>, no_op>) on_task(r, i, begin, clock[r]);
  });
  if (stuck >= 0) throw_if_broken(deadlock_at(ix, pc, stuck));  // (an index built with run = false)
  for (int r = 0; r < p; ++r) out.busy[static_cast<std::size_t>(r)] = busy_at[r];
  double total_busy = 0.0;
  for (int r = 0; r < p; ++r) {
    if (clock[static_cast<std::size_t>(r)] > out.makespan) out.makespan = clock[static_cast<std::size_t>(r)];
    total_busy += out.busy[static_cast<std::size_t>(r)];
  }
  double max_busy = 0.0;
  for (int r = 0; r < p; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    out.idle[ur] = out.makespan - out.busy[ur];
    out.span[ur] = first[ur] < 0.0 ? 0.0 : clock[ur] - first[ur];  // a rank's last op is never a receive
    out.bubble[ur] = out.span[ur] - out.busy[ur];
    max_busy = out.busy[ur] > max_busy ? out.busy[ur] : max_busy;
  }
  out.bubble_fraction = out.makespan > 0.0 ? 1.0 - total_busy / (static_cast<double>(p) * out.makespan) : 0.0;
  const double max_span = out.max_span();
  out.bubble_rate = max_span > 0.0 ? (max_span - max_busy) / max_span : 0.0;
  return out;
}

// Per op kind: does it free its activation (without, with split backward in the table); does it
// consume a received gradient (B or I). Array lookups: no evaluation steps of their own.
inline constexpr bool frees_activation[2][op_kind_count] = {
    {false, true, true, true, false, false, false, false, false, false, false, false},
    {false, true, false, true, false, false, false, false, false, false, false, false}};
inline constexpr bool consumes_gradient[op_kind_count] = {false, true,  true,  false, false, false,
                                                          false, false, false, false, false, false};

// The buffer pools of each rank in plan_memory: activations, gradients, and (where the table has
// crossings) what skip messages bring.
inline constexpr int activation_pool = 0, gradient_pool = 1, skip_value_pool = 2, skip_gradient_pool = 3;

// Gives back the skip buffers a compute op frees: the values received for its stage when it frees
// its activation, the gradients received for its stage when it consumes its gradient.
constexpr void free_skip_buffers(const table_index& ix, const task& x, bool frees_act, bool frees_grad, int* values,
                                 int* gradients, slot_pools& pools) {
  const int a = x.stage % ix.chain_length, c = x.stage / ix.chain_length;
  for (int k = 0; k < ix.crossings; ++k) {
    const auto at = static_cast<std::size_t>(c * ix.crossings + k) * static_cast<std::size_t>(ix.microbatches) +
                    static_cast<std::size_t>(x.microbatch);
    if (frees_act && ix.cross[k].to == a && values[at] != 0) {
      pools.give(skip_value_pool, values[at] - 1);
      values[at] = 0;
    }
    if (frees_grad && ix.cross[k].from == a && gradients[at] != 0) {
      pools.give(skip_gradient_pool, gradients[at] - 1);
      gradients[at] = 0;
    }
  }
}

template <table_like Table, class OnSlot>
constexpr memory_plan<Table::static_ranks> plan_memory_indexed(const Table& t, const table_index& ix,
                                                               OnSlot&& on_slot) {
  const int p = t.ranks(), m = t.microbatches();
  memory_plan<Table::static_ranks> out{make_rank_array<Table, int>(t), make_rank_array<Table, int>(t),
                                       make_rank_array<Table, int>(t), make_rank_array<Table, int>(t),
                                       make_rank_array<Table, int>(t), make_square_array<Table, int>(t),
                                       make_rank_array<Table, int>(t), make_rank_array<Table, int>(t)};
  const auto sm = static_cast<std::size_t>(t.stages()) * static_cast<std::size_t>(m > 0 ? m : 0);
  buffer<int> act_buf(sm), grad_buf(sm);  // slot + 1 held by each (stage, microbatch), 0 = none
  int* act = act_buf.data();
  int* grad = grad_buf.data();
  // Likewise for each (crossing, microbatch): the value and the gradient its skip messages brought.
  const auto km = static_cast<std::size_t>(ix.chains * ix.crossings) * static_cast<std::size_t>(m > 0 ? m : 0);
  buffer<int> skip_value_buf(km), skip_grad_buf(km);
  int* skip_value = skip_value_buf.data();
  int* skip_grad = skip_grad_buf.data();
  const bool skips = ix.crossings > 0;
  bool split = false;  // a split backward frees its activation at W, not at I
  // A forward-only table keeps nothing for a backward: each F frees its activation as it ends.
  const bool fo = forward_only_of(t);
  {  // any W in the index (its row of (stage, microbatch) positions, not every task)
    const int *w = ix.pos.data() + ix.key(op_kind::backward_weight, 0, 0), *w_end = w + sm;
    while (w != w_end && *w == 0) ++w;
    split = w != w_end;
  }
  // For the channels' capacity below: at each send, how many receives from its peer its rank has
  // run before it (by the send's place in the rank's program, the programs one after another).
  buffer<int> first_of(static_cast<std::size_t>(p) + 1), received_buf(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    first_of[static_cast<std::size_t>(r) + 1] = first_of[static_cast<std::size_t>(r)] + ix.size.data()[r];
  buffer<int> received_before_buf(static_cast<std::size_t>(first_of[static_cast<std::size_t>(p)]));
  int *received = received_buf.data(), *received_before = received_before_buf.data();
  // Two pools per rank (activations, gradients), and two for skip messages where the table has
  // crossings (values, gradients); slots handed out last-freed-first. One set, emptied for each
  // rank: at most a program's length of slots is free at once.
  int longest = 0;
  for (int r = 0; r < p; ++r) longest = ix.size.data()[r] > longest ? ix.size.data()[r] : longest;
  slot_pools pools(skips ? 4 : 2, static_cast<std::size_t>(longest) + 1);
  for (int r = 0; r < p; ++r) {
    const task* prog = ix.data.data()[r];
    const int n = ix.size.data()[r];
    constexpr int acts = activation_pool, grads = gradient_pool, skip_values = skip_value_pool,
                  skip_grads = skip_gradient_pool;
    pools.reset();
    int live = 0, peak = 0, awaiting_input = 0, peak_input = 0;
    received_buf.fill(0);
    int* received_here = received_before + first_of[static_cast<std::size_t>(r)];
    for (int i = 0; i < n; ++i) {
      const task x = prog[i];  // (a copy: each read through the pointer costs g++ more)
      const int kind = static_cast<int>(x.op);
      if (send_op[kind]) {  // a send holds nothing of its own
        received_here[i] = received[x.peer];
        continue;
      }
      received[x.peer < 0 ? 0 : x.peer] += recv_op[kind];  // (an expression, not a branch: compute ops add 0)
      const auto k =
          static_cast<std::size_t>(x.stage) * static_cast<std::size_t>(m) + static_cast<std::size_t>(x.microbatch);
      // (Conditions written where they are read, not named: each statement costs evaluation steps.)
      const bool fo_free = fo && x.op == op_kind::forward;
      const bool frees_act = frees_activation[split][kind] || fo_free;
      live += (x.op == op_kind::forward) - frees_act;
      if (split) {  // without split backward everything held awaits its B
        awaiting_input += (x.op == op_kind::forward) - consumes_gradient[kind];
        if (live > peak || (live == peak && awaiting_input > peak_input)) peak_input = awaiting_input;
      }
      peak = live + fo_free > peak ? live + fo_free : peak;  // (a forward-only F holds its own while it runs)
      if ((x.op == op_kind::forward || x.op == op_kind::recv_forward) && act[k] == 0) {
        act[k] = pools.take(acts) + 1;
        if constexpr (!std::is_same_v<std::remove_cvref_t<OnSlot>, no_op>)
          on_slot(r, i, slot_pool::activation, act[k] - 1);
      } else if (x.op == op_kind::recv_backward) {
        grad[k] = pools.take(grads) + 1;
        if constexpr (!std::is_same_v<std::remove_cvref_t<OnSlot>, no_op>)
          on_slot(r, i, slot_pool::gradient, grad[k] - 1);
      }
      if (frees_act) pools.give(acts, act[k] - 1);
      if (consumes_gradient[kind] && grad[k] != 0) pools.give(grads, grad[k] - 1);
    }
    // What skip messages bring, in a pass of its own (a table without crossings pays nothing: each
    // statement costs constant-evaluation steps).
    for (int i = 0; skips && i < n; ++i) {
      const task& x = prog[i];
      const int kind = static_cast<int>(x.op);
      if (recv_op[kind] && skip_op[kind]) {
        const bool value = x.op == op_kind::recv_skip_forward;
        int& held =
            (value ? skip_value : skip_grad)[static_cast<std::size_t>(ix.skip_id(x)) * static_cast<std::size_t>(m) +
                                             static_cast<std::size_t>(x.microbatch)];
        held = pools.take(value ? skip_values : skip_grads) + 1;
        if constexpr (!std::is_same_v<std::remove_cvref_t<OnSlot>, no_op>)
          on_slot(r, i, value ? slot_pool::skip_value : slot_pool::skip_gradient, held - 1);
      }
      const bool frees_act = frees_activation[split][kind] || (fo && x.op == op_kind::forward);
      if (frees_act || consumes_gradient[kind])
        free_skip_buffers(ix, x, frees_act, consumes_gradient[kind], skip_value, skip_grad, pools);
    }
    if (!split) peak_input = peak;
    out.peak_live[static_cast<std::size_t>(r)] = peak;
    out.peak_awaiting_input[static_cast<std::size_t>(r)] = peak_input;
    out.peak_awaiting_weight[static_cast<std::size_t>(r)] = peak - peak_input;
    out.activation_slots[static_cast<std::size_t>(r)] = pools.used(acts);
    out.gradient_slots[static_cast<std::size_t>(r)] = pools.used(grads);
    out.skip_value_slots[static_cast<std::size_t>(r)] = skips ? pools.used(skip_values) : 0;
    out.skip_gradient_slots[static_cast<std::size_t>(r)] = skips ? pools.used(skip_grads) : 0;
  }

  // Channel capacity: the most messages from a to b in flight at once in any run. For a prefix of
  // a's program, b lags furthest when it has run only what that prefix depends on: up to the last
  // send of b that a has received, having received from a what b's program receives before that
  // send (counted above). Sweeping a's program once gives the maximum. Causal chains from b to a
  // through a third rank are not followed, so the figure is never below the true one, and equal to
  // it where every two ranks that talk are linked only directly (naive, GPipe, 1F1B; interleaved's
  // ring can make it larger).
  buffer<int> recvd_buf(static_cast<std::size_t>(p)), sent_buf(static_cast<std::size_t>(p));
  int *recvd = recvd_buf.data(), *sent = sent_buf.data();
  int* capacity = out.channel_capacity.data();
  for (int a = 0; a < p; ++a) {
    recvd_buf.fill(0);
    sent_buf.fill(0);
    const task* prog = ix.data.data()[a];
    const int n = ix.size.data()[a];
    for (int i = 0; i < n; ++i) {
      const task x = prog[i];
      const int k = static_cast<int>(x.op);
      if (recv_op[k]) {
        // b has run at least through the send this receive pairs with, and what came before it.
        const int z = received_before[first_of[static_cast<std::size_t>(x.peer)] + ix.partner(x)];
        recvd[x.peer] = z > recvd[x.peer] ? z : recvd[x.peer];
      } else if (send_op[k]) {
        const int in_flight = ++sent[x.peer] - recvd[x.peer];
        int& cap =
            capacity[static_cast<std::size_t>(a) * static_cast<std::size_t>(p) + static_cast<std::size_t>(x.peer)];
        cap = in_flight > cap ? in_flight : cap;
      }
    }
  }
  return out;
}

}  // namespace detail

/// Verifies `t`, then runs it under `costs`, calling on_task(rank, position, start, end) for every
/// task. A receive completes at max(own clock, send time + costs.comm, or the model's
/// message(send)); sends take no time.
template <table_like Table, cost_function Costs, class OnTask>
constexpr timing<Table::static_ranks> simulate(const Table& t, const Costs& costs, OnTask&& on_task) {
  return detail::simulate_indexed(t, detail::index_or_throw(t), costs, on_task);  // every rule before any call
}

template <table_like Table, cost_function Costs = cost_model>
constexpr timing<Table::static_ranks> simulate(const Table& t, const Costs& costs = {}) {
  // No callback: the simulation's own run finds a deadlock (verification leaves that rule to it).
  return detail::simulate_indexed(t, detail::index_or_throw(t, false), costs, detail::no_op{});
}

/// Verifies `t`, then assigns buffer slots by liveness, calling on_slot(rank, position, pool, slot)
/// at the task where each buffer is taken. An activation is taken at its RECV_F (or its F when the
/// input is local) and given back after its B (or its W when the backward is split); a received
/// gradient is taken at its RECV_B and given back after the B or I that consumes it. What a skip
/// message brings is held likewise: a value from its RECV_SKIP_F until its stage frees its
/// activation, a gradient from its RECV_SKIP_B until its stage's B or I. In a forward-only table
/// an F gives its activation back as it ends.
template <table_like Table, class OnSlot>
constexpr memory_plan<Table::static_ranks> plan_memory(const Table& t, OnSlot&& on_slot) {
  return detail::plan_memory_indexed(t, detail::index_or_throw(t), on_slot);
}

template <table_like Table>
constexpr memory_plan<Table::static_ranks> plan_memory(const Table& t) {
  return plan_memory(t, detail::no_op{});
}

/// Verifies `t` once, then simulates it under `costs` and plans its memory. A table that breaks a
/// rule throws verification_error at run time and does not compile in a constant expression.
template <table_like Table, cost_function Costs = cost_model>
constexpr report<Table::static_ranks> analyse(const Table& t, const Costs& costs = {}) {
  const detail::table_index ix = detail::index_or_throw(t, false);  // the simulation finds a deadlock
  report<Table::static_ranks> r{};
  static_cast<timing<Table::static_ranks>&>(r) = detail::simulate_indexed(t, ix, costs, detail::no_op{});
  static_cast<memory_plan<Table::static_ranks>&>(r) = detail::plan_memory_indexed(t, ix, detail::no_op{});
  return r;
}

}  // namespace ctpipe
