// Analysis: simulate a verified table under a cost model (makespan, busy and idle time, bubble
// fraction), and plan its memory (peak live activations, buffer slots by liveness, the capacity
// every rank-to-rank channel needs). Plain constexpr: the same code at compile time and run time.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include <ctpipe/analysis/verify.hpp>

namespace ctpipe {

/// Uniform per-op costs (every stage alike) and a per-message latency. For interleaved schedules
/// these are the costs of one chunk.
struct cost_model {
  double forward = 1.0;
  double backward = 2.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  double comm = 0.0;  // time from a send until its receive can complete

  constexpr double operator()(const task& t) const {
    switch (t.op) {
      case op_kind::forward: return forward;
      case op_kind::backward: return backward;
      case op_kind::backward_input: return backward_input;
      case op_kind::backward_weight: return backward_weight;
      default: return 0.0;
    }
  }
};

/// Per-stage costs for `Stages` stages (for interleaved: per chunk-stage).
template <std::size_t Stages>
struct stage_costs {
  std::array<double, Stages> forward{}, backward{}, backward_input{}, backward_weight{};
  double comm = 0.0;

  constexpr double operator()(const task& t) const {
    const auto s = static_cast<std::size_t>(t.stage);
    switch (t.op) {
      case op_kind::forward: return forward[s];
      case op_kind::backward: return backward[s];
      case op_kind::backward_input: return backward_input[s];
      case op_kind::backward_weight: return backward_weight[s];
      default: return 0.0;
    }
  }
};

/// A cost model: the cost of a task, and a `comm` latency per message.
template <class C>
concept cost_function = requires(const C& c, const task& t) {
  { c(t) } -> std::convertible_to<double>;
  { c.comm } -> std::convertible_to<double>;
};

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
constexpr std::size_t squared(std::size_t n) { return n == std::dynamic_extent ? n : n * n; }
}  // namespace detail

/// std::array<T, N> for tables with a static rank count, std::vector<T> otherwise.
template <class T, std::size_t N>
using rank_array = typename detail::rank_array_for<T, N>::type;

/// Timing of one step under a cost model.
template <std::size_t Ranks>
struct timing {
  double makespan = 0.0;
  double bubble_fraction = 0.0;  // 1 - total busy / (ranks x makespan)
  rank_array<double, Ranks> busy{};
  rank_array<double, Ranks> idle{};
};

/// Memory of one step.
template <std::size_t Ranks>
struct memory_plan {
  rank_array<int, Ranks> peak_live{};         // activations alive at once (+1 at F, -1 at B or W)
  rank_array<int, Ranks> activation_slots{};  // buffers for stashed activations, reused by liveness
  rank_array<int, Ranks> gradient_slots{};    // buffers for received gradients, reused by liveness
  rank_array<int, detail::squared(Ranks)> channel_capacity{};  // [from * ranks + to]: messages in flight at most

  constexpr int capacity(int from, int to) const {
    const auto p = static_cast<std::size_t>(peak_live.size());
    return channel_capacity[static_cast<std::size_t>(from) * p + static_cast<std::size_t>(to)];
  }
};

/// Everything analyse() measures.
template <std::size_t Ranks>
struct report : timing<Ranks>, memory_plan<Ranks> {};

/// Which pool a buffer slot belongs to.
enum class slot_pool : int { activation, gradient };

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

// Verification failed inside a constant evaluation: the compiler stops here. Use
// static_assert(ctpipe::check<table>()) to see which rule, rank and position.
[[noreturn]] inline void analysis_of_an_invalid_table(const verification& v) { throw verification_error(v); }

template <table_like Table>
constexpr void require_valid_table(const Table& t) {
  if (auto v = verify(t); !v.ok()) analysis_of_an_invalid_table(v);
}

// Slots reused last-freed-first: the number of slots a pool needs is its peak occupancy.
struct slot_pool_state {
  buffer<int> free_list;
  int free_count = 0;
  int used = 0;  // slots ever handed out
  constexpr int take() {
    if (free_count > 0) return free_list[static_cast<std::size_t>(--free_count)];
    return used++;
  }
  constexpr void give(int slot) { free_list[static_cast<std::size_t>(free_count++)] = slot; }
};

}  // namespace detail

/// Runs a verified table under `costs`, calling on_task(rank, position, start, end) for every
/// task. Receives complete at max(own clock, send time + costs.comm); sends take no time.
template <table_like Table, cost_function Costs, class OnTask>
constexpr timing<Table::static_ranks> simulate(const Table& t, const Costs& costs, OnTask&& on_task) {
  detail::require_valid_table(t);
  const int p = t.ranks();
  const detail::comm_index ix = detail::index_comm(t);
  detail::buffer<double> when(ix.match.size(), 0.0);  // completion time of every op
  detail::buffer<double> clock(static_cast<std::size_t>(p), 0.0);
  timing<Table::static_ranks> out{0.0, 0.0, detail::make_rank_array<Table, double>(t),
                                  detail::make_rank_array<Table, double>(t)};
  detail::run_blocking(t, ix, [&](int r, int i, int g) {
    const task& x = t.program(r)[static_cast<std::size_t>(i)];
    double& c = clock[static_cast<std::size_t>(r)];
    double start = c;
    if (is_recv(x.op)) {
      const double ready = when[static_cast<std::size_t>(ix.match[static_cast<std::size_t>(g)])] + costs.comm;
      if (ready > start) start = ready;
      c = start;
    } else if (is_compute(x.op)) {
      const double d = static_cast<double>(costs(x));
      c = start + d;
      out.busy[static_cast<std::size_t>(r)] += d;
    }
    when[static_cast<std::size_t>(g)] = c;
    on_task(r, i, start, c);
  });
  double total_busy = 0.0;
  for (int r = 0; r < p; ++r) {
    if (clock[static_cast<std::size_t>(r)] > out.makespan) out.makespan = clock[static_cast<std::size_t>(r)];
    total_busy += out.busy[static_cast<std::size_t>(r)];
  }
  for (int r = 0; r < p; ++r) out.idle[static_cast<std::size_t>(r)] = out.makespan - out.busy[static_cast<std::size_t>(r)];
  out.bubble_fraction = out.makespan > 0.0 ? 1.0 - total_busy / (static_cast<double>(p) * out.makespan) : 0.0;
  return out;
}

template <table_like Table, cost_function Costs>
constexpr timing<Table::static_ranks> simulate(const Table& t, const Costs& costs) {
  return simulate(t, costs, [](int, int, double, double) {});
}

/// Assigns buffer slots by liveness and calls on_slot(rank, position, pool, slot) for the task at
/// which each buffer is taken. An activation is taken at its RECV_F (or its F when the input is
/// local) and given back after its B (or W when the backward is split); a received gradient is
/// taken at its RECV_B and given back after the B or I that consumes it.
template <table_like Table, class OnSlot>
constexpr memory_plan<Table::static_ranks> plan_memory(const Table& t, OnSlot&& on_slot) {
  detail::require_valid_table(t);
  const int p = t.ranks(), S = t.stages(), m = t.microbatches();
  memory_plan<Table::static_ranks> out{detail::make_rank_array<Table, int>(t), detail::make_rank_array<Table, int>(t),
                                       detail::make_rank_array<Table, int>(t),
                                       detail::make_square_array<Table, int>(t)};
  const auto sm = static_cast<std::size_t>(S) * static_cast<std::size_t>(m);
  detail::buffer<int> act(sm, -1), grad(sm, -1);
  bool split = false;
  for (int r = 0; r < p && !split; ++r)
    for (const task& x : t.program(r))
      if (x.op == op_kind::backward_weight) split = true;
  for (int r = 0; r < p; ++r) {
    auto prog = t.program(r);
    detail::slot_pool_state acts{detail::buffer<int>(prog.size() + 1), 0, 0};
    detail::slot_pool_state grads{detail::buffer<int>(prog.size() + 1), 0, 0};
    int live = 0, peak = 0;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const task& x = prog[i];
      const auto k = static_cast<std::size_t>(x.stage) * static_cast<std::size_t>(m) + static_cast<std::size_t>(x.microbatch);
      const int pos = static_cast<int>(i);
      switch (x.op) {
        case op_kind::recv_forward:
        case op_kind::forward:
          if (x.op == op_kind::forward) {
            if (++live > peak) peak = live;
          }
          if (act[k] < 0) {
            act[k] = acts.take();
            on_slot(r, pos, slot_pool::activation, act[k]);
          }
          break;
        case op_kind::recv_backward:
          grad[k] = grads.take();
          on_slot(r, pos, slot_pool::gradient, grad[k]);
          break;
        case op_kind::backward:
        case op_kind::backward_input:
          if (grad[k] >= 0) grads.give(grad[k]);
          if (x.op == op_kind::backward || !split) {
            --live;
            acts.give(act[k]);
          }
          break;
        case op_kind::backward_weight:
          --live;
          acts.give(act[k]);
          break;
        default: break;
      }
    }
    out.peak_live[static_cast<std::size_t>(r)] = peak;
    out.activation_slots[static_cast<std::size_t>(r)] = acts.used;
    out.gradient_slots[static_cast<std::size_t>(r)] = grads.used;
  }

  // Channel capacity: the most messages that can be in flight from a to b in any run. For each
  // prefix of a's program, the run in which b lags furthest is the smallest set of ops that must
  // have happened before it (its causal closure: program order, plus each receive's send). The
  // closure only grows with the prefix, so one sweep per sending rank finds the maximum.
  const detail::comm_index ix = detail::index_comm(t);
  detail::buffer<int> done(static_cast<std::size_t>(p)), recvd(static_cast<std::size_t>(p)),
      sent(static_cast<std::size_t>(p)), stack(2 * ix.match.size() + 2);
  for (int a = 0; a < p; ++a) {
    done.fill(0);
    recvd.fill(0);
    sent.fill(0);
    auto prog_a = t.program(a);
    for (std::size_t x = 0; x < prog_a.size(); ++x) {
      // Include (a, x) and everything it depends on.
      std::size_t top = 0;
      stack[top++] = a;
      stack[top++] = static_cast<int>(x);
      while (top > 0) {
        const int y = stack[--top];
        const int c = stack[--top];
        auto prog_c = t.program(c);
        int& d = done[static_cast<std::size_t>(c)];
        while (d <= y) {
          const task& op = prog_c[static_cast<std::size_t>(d)];
          if (is_recv(op.op)) {
            if (op.peer == a) ++recvd[static_cast<std::size_t>(c)];
            const int s = ix.match[static_cast<std::size_t>(ix.global(c, d))];
            const int sr = ix.rank_of_global(s);
            stack[top++] = sr;
            stack[top++] = s - ix.global(sr, 0);
          }
          ++d;
        }
      }
      const task& op = prog_a[x];
      if (is_send(op.op)) {
        const auto b = static_cast<std::size_t>(op.peer);
        const int in_flight = ++sent[b] - recvd[b];
        int& cap = out.channel_capacity[static_cast<std::size_t>(a) * static_cast<std::size_t>(p) + b];
        if (in_flight > cap) cap = in_flight;
      }
    }
  }
  return out;
}

template <table_like Table>
constexpr memory_plan<Table::static_ranks> plan_memory(const Table& t) {
  return plan_memory(t, [](int, int, slot_pool, int) {});
}

/// Verifies `t`, then simulates it under `costs` and plans its memory. A table that breaks a rule
/// throws verification_error at run time and does not compile in a constant expression.
template <table_like Table, cost_function Costs = cost_model>
constexpr report<Table::static_ranks> analyse(const Table& t, const Costs& costs = {}) {
  report<Table::static_ranks> r{};
  static_cast<timing<Table::static_ranks>&>(r) = simulate(t, costs);
  static_cast<memory_plan<Table::static_ranks>&>(r) = plan_memory(t);
  return r;
}

}  // namespace ctpipe
