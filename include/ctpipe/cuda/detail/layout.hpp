// Where the CUDA engine's buffers live (one allocation per device, an offset per buffer) and the
// numbers of a plan its engine is a template of: computed at compile time from an execution plan,
// its issue plan and the stage plan.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>  // CTPIPE_NTTP_TYPE
#include <ctpipe/cuda/detail/graph_layout.hpp>
#include <ctpipe/cuda/layer.hpp>
#include <ctpipe/cuda/plan.hpp>
#include <ctpipe/detail/index.hpp>
#include <ctpipe/exec/core.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>  // route  // ix
#include <ctpipe/model/partition.hpp>

namespace ctpipe::cuda::detail {

// Where each buffer lives: per device, one allocation; per buffer, its offset in it.
template <std::size_t S, std::size_t L1, std::size_t D, std::size_t K = 0>
struct memory_layout {
  std::array<std::size_t, D> bytes{};
  std::array<std::size_t, S> stash_base{}, stash_stride{}, grads_base{};
  std::array<std::size_t, S> grad_stash_base{}, grad_stash_stride{};  // split backward: per stash slot, I to W
  std::array<std::array<std::size_t, L1>, S> stash_at{}, grads_at{};  // element k: offset in a slot / in grads
  std::array<std::array<std::size_t, L1>, S> saved_at{};              // layer k's saved state: offset in a stash slot
  std::array<std::size_t, S> local_backward_base{}, ring_forward_base{}, ring_backward_base{};  // boundary b
  std::array<std::size_t, 2> losses{};  // per chain (a bidirectional table has two): on its last stage's device
  // On each device a rank uses: the step's words, its number (a std::uint64_t) and then each
  // microbatch's extent (an int; ctpipe/model/extent.hpp).
  std::array<std::size_t, D> step_at{};
  // Graph models: each stage's scratch (graph_offsets), and crossing k's buffers (as a boundary's).
  std::array<std::size_t, S> scratch_base{};
  std::array<std::size_t, K> skip_local_backward_base{}, skip_ring_forward_base{}, skip_ring_backward_base{};
};

// The bytes of a device's step words: the step's number, then `microbatches` extents.
constexpr std::size_t step_words_bytes(int microbatches) {
  return sizeof(std::uint64_t) + sizeof(int) * ctpipe::detail::ix(microbatches);
}

template <auto Placement, std::size_t R>
consteval std::array<int, R> devices_of() {
  if constexpr (std::is_integral_v<decltype(Placement)>) {
    std::array<int, R> d{};
    d.fill(static_cast<int>(Placement));
    return d;
  } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(Placement)>, placement<R>>) {
    return Placement.device;
  } else {
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(Placement)>, placement<R>>,
                  "ctpipe::cuda::executor: Placement must be a device number or a ctpipe::cuda::placement<ranks> with "
                  "one device per rank of the table");
    return std::array<int, R>{};  // (a stand-in, so that nothing follows the message)
  }
}

// The numbers of an executor's plan that its engine needs: O(stages), where the table is O(tasks).
// The engine is a template of these alone, so that its per-task member functions do not carry the
// whole table in their names (as in the host executor: that keeps compile time linear).
template <std::size_t R, std::size_t S, std::size_t L1, std::size_t D, std::size_t K = 0, std::size_t KM = 0,
          std::size_t M = 0>
struct layout {
  static constexpr std::size_t ranks = R, stage_count = S, devices_used = D;
  ctpipe::detail::stage_layout<R, S, K, KM> stages{};  // the core's per-stage layout
  std::array<int, R> device{};
  std::array<handoff, S> forward{}, backward{};
  std::array<int, S> sent_forward{}, consumed_forward{}, sent_backward{}, consumed_backward{};
  int fork_event = 0, join_event = 0, pair_fork_event = -1, pair_join_event = -1, events = 0;
  bool multi_device = false, pairs = false;
  memory_layout<S, L1, D, K> memory{};
  std::array<std::size_t, S + 1> x_bases{};  // stage s's stash input pointers: [x_bases[s], x_bases[s + 1])
  // Graph models (the issue plan's): the crossings' hand-offs and events, and each F's stash slot.
  std::array<handoff, K> skip_forward{}, skip_backward{};
  std::array<int, K> skip_sent_forward{}, skip_consumed_forward{}, skip_sent_backward{}, skip_consumed_backward{};
  std::array<std::array<int, M>, S> stash_of{};
};

// The crossing (a graph model's skip route) from stage a to stage b of layout l; where there is
// none, the number of crossings.
template <class Layout>
constexpr int crossing_of(const Layout& l, int a, int b) {
  const int n = static_cast<int>(l.stages.skips.size());
  for (int k = 0; k < n; ++k)
    if (l.stages.skips[ctpipe::detail::ix(k)].from == a && l.stages.skips[ctpipe::detail::ix(k)].to == b) return k;
  return n;
}

// Process mode keys its FIFOs by edge (cuda/detail/process_mode.hpp: fifo_layout): boundary b is
// edge b, crossing k edge boundaries + k. The stages an edge joins:
template <class Layout>
constexpr int boundary_count(const Layout&) {
  return Layout::stage_count > 1 ? static_cast<int>(Layout::stage_count) - 1 : 0;
}
template <class Layout>
constexpr int edge_from(const Layout& l, int e) {
  const int b = boundary_count(l);
  return e < b ? e : l.stages.skips[ctpipe::detail::ix(e - b)].from;
}
template <class Layout>
constexpr int edge_to(const Layout& l, int e) {
  const int b = boundary_count(l);
  return e < b ? e + 1 : l.stages.skips[ctpipe::detail::ix(e - b)].to;
}

// Route m's place in layout l: its crossing (a boundary's index, or a skip crossing's), its edge
// (process mode's FIFO), hand-off and ring capacity, and the events of its first message (sent,
// and consumed where the hand-off is a ring copy).
struct route_facts {
  int crossing, edge;
  handoff how;
  int capacity, sent, consumed;
};
template <class Layout>
constexpr route_facts route_facts_of(const Layout& l, ctpipe::detail::route m) {
  const bool b = m.backward;
  if (m.skip) {
    const int k = crossing_of(l, m.lower, m.upper);
    const auto u = ctpipe::detail::ix(k);
    return {k,
            boundary_count(l) + k,
            b ? l.skip_backward[u] : l.skip_forward[u],
            l.stages.skips[u].capacity,
            b ? l.skip_sent_backward[u] : l.skip_sent_forward[u],
            b ? l.skip_consumed_backward[u] : l.skip_consumed_forward[u]};
  }
  const auto u = ctpipe::detail::ix(m.lower);
  return {m.lower,
          m.lower,
          b ? l.backward[u] : l.forward[u],
          l.stages.channel_capacity[u],
          b ? l.sent_backward[u] : l.sent_forward[u],
          b ? l.consumed_backward[u] : l.consumed_forward[u]};
}

// Each of layout l's N events on the device of the stream that records it: a message's sent event
// on its sender's, a consumed event on its receiver's, the step's fork and join events and the
// pairs' on their rank's.
template <std::size_t N, class Layout>
constexpr std::array<int, N> event_devices(const Layout& l) {
  using ctpipe::detail::ix;
  const int microbatches = l.stages.microbatches, stages = static_cast<int>(Layout::stage_count);
  const auto device = [&](int s) { return l.device[ix(l.stages.stage_rank[ix(s)])]; };
  const auto mark = [&](std::array<int, N>& d, int first, int count, int dev) {
    if (first >= 0)
      for (int k = 0; k < count; ++k) d[ix(first + k)] = dev;
  };
  std::array<int, N> d{};
  for (int b = 0; b + 1 < stages; ++b) {
    const auto u = ix(b);
    const int c = l.stages.channel_capacity[u], reused = microbatches > c ? microbatches - c : 0;
    mark(d, l.sent_forward[u], microbatches, device(b));
    mark(d, l.sent_backward[u], microbatches, device(b + 1));
    mark(d, l.consumed_forward[u], reused, device(b + 1));
    mark(d, l.consumed_backward[u], reused, device(b));
  }
  for (int j = 0; j < static_cast<int>(l.stages.skips.size()); ++j) {  // (int: nvcc warns of k < 0)
    const auto k = ix(j);
    const skip_route& route = l.stages.skips[k];
    const int reused = microbatches > route.capacity ? microbatches - route.capacity : 0;
    mark(d, l.skip_sent_forward[k], microbatches, device(route.from));
    mark(d, l.skip_sent_backward[k], microbatches, device(route.to));
    mark(d, l.skip_consumed_forward[k], reused, device(route.to));
    mark(d, l.skip_consumed_backward[k], reused, device(route.from));
  }
  d[ix(l.fork_event)] = l.device[0];
  for (std::size_t r = 0; r < l.device.size(); ++r) {
    d[ix(l.join_event) + r] = l.device[r];
    if (l.pairs) {
      d[ix(l.pair_fork_event) + r] = l.device[r];
      d[ix(l.pair_join_event) + r] = l.device[r];
    }
  }
  return d;
}

// (0 for a host tensor: a model of host layers has been refused by executor_requirements, and the
// layout it gets says nothing more.)
template <model_type Model, std::size_t K>
constexpr std::size_t tensor_bytes_at() {
  if constexpr (requires { boundary_t<Model, K>::bytes; })
    return ctpipe::detail::ix(boundary_t<Model, K>::bytes);
  else
    return 0;
}

/// The layout of plan `ExecPlan` with issue plan `Issue` for Model split by Stages.
template <model_type Model, auto Stages, auto ExecPlan, auto Issue, std::size_t D>
consteval auto make_layout() {
  constexpr std::size_t R = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_ranks,
                        S = CTPIPE_NTTP_TYPE(ExecPlan.table)::static_stages, K = ExecPlan.skips.size(),
                        KM = ExecPlan.skip_value_at.size(), M = Issue.stash_of[0].size();
  constexpr bool graph = graph_path<Model>;
  constexpr auto bytes = []<std::size_t... K>(std::index_sequence<K...>) {
    return std::array<std::size_t, Model::size + 1>{tensor_bytes_at<Model, K>()...};
  }
  (std::make_index_sequence<Model::size + 1>{});
  constexpr auto saved_bytes = []<std::size_t... K>(std::index_sequence<K...>) {
    return std::array<std::size_t, Model::size + 1>{saved_bytes_at<Model, K>()..., 0};
  }
  (std::make_index_sequence<Model::size>{});
  layout<R, S, Model::size + 1, D, K, KM, M> l{};
  l.stages = ctpipe::detail::stage_layout_of(ExecPlan, Stages.stages());
  // A bidirectional table's stage s runs model stage s % chain (its second chain: mirrored copies).
  const int chain = l.stages.chain_length;
  l.device = Issue.device;
  l.forward = Issue.forward;
  l.backward = Issue.backward;
  l.sent_forward = Issue.sent_forward;
  l.consumed_forward = Issue.consumed_forward;
  l.sent_backward = Issue.sent_backward;
  l.consumed_backward = Issue.consumed_backward;
  l.fork_event = Issue.fork_event;
  l.join_event = Issue.join_event;
  l.pair_fork_event = Issue.pair_fork_event;
  l.pair_join_event = Issue.pair_join_event;
  l.pairs = Issue.pairs;
  l.events = Issue.events;
  l.multi_device = Issue.multi_device;
  l.skip_forward = Issue.skip_forward;
  l.skip_backward = Issue.skip_backward;
  l.skip_sent_forward = Issue.skip_sent_forward;
  l.skip_consumed_forward = Issue.skip_consumed_forward;
  l.skip_sent_backward = Issue.skip_sent_backward;
  l.skip_consumed_backward = Issue.skip_consumed_backward;
  l.stash_of = Issue.stash_of;
  for (std::size_t s = 0; s < S; ++s) l.x_bases[s + 1] = l.x_bases[s] + ctpipe::detail::ix(ExecPlan.stash_slots[s]);

  auto& m = l.memory;
  const auto dev = [&](std::size_t s) {
    return ctpipe::detail::ix(Issue.device[ctpipe::detail::ix(ExecPlan.table.stage_rank[s])]);
  };
  const auto take = [&](std::size_t d, std::size_t n) {
    const std::size_t at = m.bytes[d];
    m.bytes[d] += round_up(n);
    return at;
  };
  // A forward-only table (evaluate, predict) moves no gradient: of the gradient buffers it keeps
  // only the last stage's of each chain, where the loss writes a gradient nothing reads.
  const bool backward = !ExecPlan.forward_only;
  if constexpr (graph) {
    // Every buffer as graph_places gives it; a boundary's and a crossing's sized by their messages.
    constexpr auto& g = graph_places<Model, Stages>::offsets;
    for (std::size_t s = 0; s < S; ++s) {
      const auto slots = ctpipe::detail::ix(ExecPlan.stash_slots[s]);
      m.stash_stride[s] = g.slot_bytes[s];
      m.stash_base[s] = take(dev(s), g.slot_bytes[s] * slots);
      if (backward || s + 1 == S) m.grads_base[s] = take(dev(s), g.grad_bytes[s]);
      if (ExecPlan.split_backward) {
        m.grad_stash_stride[s] = g.grad_bytes[s];
        m.grad_stash_base[s] = take(dev(s), g.grad_bytes[s] * slots);
      }
      m.scratch_base[s] = take(dev(s), g.scratch_bytes[s]);
      if (s + 1 < S) {
        const std::size_t v = g.value_bytes[s][s + 1], b = g.gradient_bytes[s][s + 1];
        if (backward && Issue.backward[s] == handoff::local_slot)
          m.local_backward_base[s] = take(dev(s), b * ctpipe::detail::ix(ExecPlan.local_backward_slots[s]));
        if (Issue.forward[s] == handoff::ring_copy)
          m.ring_forward_base[s] = take(dev(s + 1), v * ctpipe::detail::ix(Issue.capacity[s]));
        if (backward && (Issue.backward[s] == handoff::ring_direct || Issue.backward[s] == handoff::ring_copy))
          m.ring_backward_base[s] = take(dev(s), b * ctpipe::detail::ix(Issue.capacity[s]));
      }
    }
    for (int j = 0; j < static_cast<int>(K); ++j) {  // (int: nvcc warns of an unsigned compared with a zero K)
      const auto k = ctpipe::detail::ix(j);
      const skip_route& route = ExecPlan.skips[k];
      const auto from = ctpipe::detail::ix(route.from), to = ctpipe::detail::ix(route.to);
      const std::size_t v = g.value_bytes[from][to], b = g.gradient_bytes[from][to];
      if (backward && Issue.skip_backward[k] == handoff::local_slot)
        m.skip_local_backward_base[k] = take(dev(from), b * ctpipe::detail::ix(route.gradient_slots));
      if (Issue.skip_forward[k] == handoff::ring_copy)
        m.skip_ring_forward_base[k] = take(dev(to), v * ctpipe::detail::ix(Issue.skip_capacity[k]));
      if (backward && Issue.skip_backward[k] != handoff::local_slot)
        m.skip_ring_backward_base[k] = take(dev(from), b * ctpipe::detail::ix(Issue.skip_capacity[k]));
    }
  }
  for (std::size_t s = 0; s < S && !graph; ++s) {
    const std::size_t j = s % ctpipe::detail::ix(chain);
    const int f = Stages.first[j], n = Stages.first[j + 1] - f;
    // A slot holds the stage's input only when it is copied in (through a ring, or from the
    // producer's stash with split backward; else it is a pointer), every layer's output, and every
    // layer's saved state (live, like the activations, from the microbatch's F to its B or W).
    std::size_t slot = 0;
    for (int k = 0; k <= n; ++k) {
      const bool owned =
          k > 0 ||
          (j > 0 && (Issue.forward[s - 1] == handoff::ring_copy || Issue.forward[s - 1] == handoff::stash_copy));
      m.stash_at[s][ctpipe::detail::ix(k)] = slot;
      if (owned) slot += round_up(bytes[ctpipe::detail::ix(f + k)]);
    }
    for (int k = 0; k < n; ++k) {
      m.saved_at[s][ctpipe::detail::ix(k)] = slot;
      slot += round_up(saved_bytes[ctpipe::detail::ix(f + k)]);
    }
    m.stash_stride[s] = slot;
    m.stash_base[s] = take(dev(s), slot * ctpipe::detail::ix(ExecPlan.stash_slots[s]));
    std::size_t g = 0;
    for (int k = 0; k <= n; ++k) {
      m.grads_at[s][ctpipe::detail::ix(k)] = g;
      g += round_up(bytes[ctpipe::detail::ix(f + k)]);
    }
    if (backward || j + 1 == ctpipe::detail::ix(chain)) m.grads_base[s] = take(dev(s), g);
    if (ExecPlan.split_backward) {
      m.grad_stash_stride[s] = g;
      m.grad_stash_base[s] = take(dev(s), g * ctpipe::detail::ix(ExecPlan.stash_slots[s]));
    }
    if (s + 1 < S &&
        j + 1 < ctpipe::detail::ix(chain)) {  // boundary s: its buffers live with the stage that reads them
      const std::size_t b = round_up(bytes[ctpipe::detail::ix(Stages.first[j + 1])]);
      if (backward && Issue.backward[s] == handoff::local_slot)
        m.local_backward_base[s] = take(dev(s), b * ctpipe::detail::ix(ExecPlan.local_backward_slots[s]));
      if (Issue.forward[s] == handoff::ring_copy)
        m.ring_forward_base[s] = take(dev(s + 1), b * ctpipe::detail::ix(Issue.capacity[s]));
      if (backward && (Issue.backward[s] == handoff::ring_direct || Issue.backward[s] == handoff::ring_copy))
        m.ring_backward_base[s] = take(dev(s), b * ctpipe::detail::ix(Issue.capacity[s]));
    }
  }
  for (std::size_t s = ctpipe::detail::ix(chain) - 1; s < S; s += ctpipe::detail::ix(chain))
    m.losses[s / ctpipe::detail::ix(chain)] = take(dev(s), sizeof(double) * ctpipe::detail::ix(l.stages.microbatches));
  std::array<bool, D> has_step{};
  for (std::size_t r = 0; r < R; ++r) {
    const auto d = ctpipe::detail::ix(Issue.device[r]);
    if (!has_step[d]) m.step_at[d] = take(d, step_words_bytes(l.stages.microbatches));
    has_step[d] = true;
  }
  return l;
}

}  // namespace ctpipe::cuda::detail
