// The CUDA engine's tasks of a graph model's stage (cuda/detail/engine.hpp declares them): every
// message a copy into the stash slot (from the producer's slot on one device, from a ring across
// devices), each layer's input parts gathered from there and from the stage's own layers' outputs,
// a message packed for each later stage that reads something the stage made; on the way back the
// gradient terms later stages sent (the farthest first), the layers from the top down, each input
// part's gradient starting its sum in place or added to it (Backend::add) in the sequential
// step's order (exec/detail/graph_stages.hpp); where the tensors lie: cuda/detail/graph_layout.hpp.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, bool Input>
inline char* engine<Model, Stages, Loss, Backend, Layout, Transport>::grads_base(int slot) const {
  constexpr auto u = ctpipe::detail::ix(S);
  if constexpr (Input)
    return base<S>() + mem.grad_stash_base[u] + ctpipe::detail::ix(slot) * mem.grad_stash_stride[u];
  else
    return base<S>() + mem.grads_base[u];
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int K>
inline char* engine<Model, Stages, Loss, Backend, Layout, Transport>::skip_ring_forward(int n) const {
  constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
  return base<r.to>() + mem.skip_ring_forward_base[ctpipe::detail::ix(K)] +
         ctpipe::detail::ix(n % skip_capacity<K>) *
             go.value_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int K>
inline char* engine<Model, Stages, Loss, Backend, Layout, Transport>::skip_ring_backward(int n) const {
  constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
  return base<r.from>() + mem.skip_ring_backward_base[ctpipe::detail::ix(K)] +
         ctpipe::detail::ix(n % skip_capacity<K>) *
             go.gradient_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <class T, class Where>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::parts_view(Where&& where) -> T {
  if constexpr (is_tensors_v<T>) return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return T{part_t<T, I>{static_cast<typename part_t<T, I>::value_type*>(
          static_cast<void*>(where(std::integral_constant<int, static_cast<int>(I)>{})))}...};
    }
  (std::make_index_sequence<parts_v<T>>{});
  else return T{static_cast<typename T::value_type*>(static_cast<void*>(where(std::integral_constant<int, 0>{})))};
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int Layer>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_x(int slot, int mb) const ->
    typename layer_t<Layer>::input_type {
  return parts_view<typename layer_t<Layer>::input_type>([&](auto i) -> char* {
    constexpr int ei = wiring::edge_of(Layer, decltype(i)::value);
    constexpr edge e = wiring::at(ei);
    if constexpr (wiring::crosses(e)) {
      constexpr int a = wiring::producer_stage(e);
      constexpr std::size_t at =
          go.inbox_at[ctpipe::detail::ix(S)][ctpipe::detail::ix(a)] + places::wire_offset(a, S, wiring::wire_of(ei));
      return slot_base<S>(slot) + at;
    } else if constexpr (e.producer < 0) {
      return model_input_part(mb, e.output);
    } else {
      return slot_base<S>(slot) + go.out_at[ctpipe::detail::ix(e.producer)][ctpipe::detail::ix(e.output)];
    }
  });
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S, int Layer>
inline auto engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_saved(int slot) const {
  if constexpr (has_saved_state<layer_t<Layer>>)
    return view<saved_t<layer_t<Layer>>>(slot_base<S>(slot) + go.saved_at[ctpipe::detail::ix(Layer)]);
  else
    return no_saved_state{};
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline char* engine<Model, Stages, Loss, Backend, Layout, Transport>::model_input_part(int mb, int o) const {
  char* p = nullptr;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((o == static_cast<int>(I) ? (p = reinterpret_cast<char*>(part<I>(inputs_[ctpipe::detail::ix(mb)]).data)) : p),
     ...);
  }
  (std::make_index_sequence<parts_v<input_type>>{});
  return p;
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <bool Gradient, int A, int B, class One>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::copy_message(int mb, char* to, const char* from,
                                                                                  One&& one) {
  constexpr auto a = ctpipe::detail::ix(A), b = ctpipe::detail::ix(B);
  constexpr std::size_t whole = Gradient ? go.gradient_bytes[a][b] : go.value_bytes[a][b];
  constexpr int count = Gradient ? wiring::term_count(B, A) : wiring::wire_count(A, B);
  constexpr bool tokens = [] {
    for (int w = 0; w < count; ++w)
      if (wiring::at(Gradient ? wiring::term_edge(B, A, w) : wiring::wire_edge(A, B, w)).token_bytes > 0) return true;
    return false;
  }();
  if constexpr (tokens) {
    if (!capturing_) {
      each<count>([&](auto w) {
        constexpr int W = decltype(w)::value;
        constexpr edge e = wiring::at(Gradient ? wiring::term_edge(B, A, W) : wiring::wire_edge(A, B, W));
        constexpr std::size_t at = Gradient ? places::term_offset(B, A, W) : places::wire_offset(A, B, W);
        one(to + at, from + at, used_of(e.bytes, e.token_bytes, mb));
      });
      return;
    }
  }
  one(to, from, whole);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class T, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::add(const A& a, void* to, const void* from,
                                                                         stream_type s) {
  using V = typename T::value_type;
  check_task<R, Op, S>(Backend::add(adders_[ctpipe::detail::ix(device_of<S>)], static_cast<V*>(to),
                                    static_cast<const V*>(from), T::bytes / sizeof(V), s),
                       "cuBLAS axpy (a gradient's sum)", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int E, int Dir>
inline std::size_t engine<Model, Stages, Loss, Backend, Layout, Transport>::transport_bytes(
    int n, std::size_t whole) const noexcept {
  constexpr std::size_t row = message_token_bytes<E, Dir>();
  if constexpr (row == 0) {
    return whole;
  } else {
    if (graph_step_) return whole;
    constexpr auto fifo = ctpipe::detail::ix(2 * E + Dir);
    return row * ctpipe::detail::ix(
                     extents_[ctpipe::detail::ix(Transport::fifos.message_microbatch[fifo][ctpipe::detail::ix(n)])]);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, ctpipe::detail::route M, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_send(const A& a, stream_type s) {
  constexpr op_kind Op = op_of(M);
  constexpr int S = M.here;
  constexpr route_facts x = facts_of<M>;
  constexpr auto h = ctpipe::detail::ix(S), f = ctpipe::detail::ix(M.far);
  constexpr auto lo = ctpipe::detail::ix(M.lower), hi = ctpipe::detail::ix(M.upper);
  char* from = nullptr;
  if constexpr (M.backward)
    from = scratch_base<S>() + go.outbox_at[h][f];
  else if constexpr (M.skip)
    from = slot_base<S>(layout_.stash_of[h][ctpipe::detail::ix(a.microbatch)]) + go.sendbox_at[h][f];
  else
    from = slot_base<S>(a.stash) + go.sendbox_at[h][f];
  if constexpr (only >= 0) {
    const std::size_t whole = M.backward ? go.gradient_bytes[lo][hi] : go.value_bytes[lo][hi];
    transport_->template send<x.edge, M.backward>(a.message, from,
                                                  transport_bytes<x.edge, M.backward>(a.message, whole), s);
  } else {
    if constexpr (x.how == handoff::ring_copy) {
      if (a.message >= x.capacity)
        check_task<R, Op, S>(Backend::wait(s, event(x.consumed + a.message - x.capacity)), "cudaStreamWaitEvent", a);
      char* ring = nullptr;
      if constexpr (M.skip)
        ring = M.backward ? skip_ring_backward<x.crossing>(a.message) : skip_ring_forward<x.crossing>(a.message);
      else
        ring = M.backward ? graph_ring_backward<M.lower>(a.message) : graph_ring_forward<M.lower>(a.message);
      copy_message<M.backward, M.lower, M.upper>(
          a.microbatch, ring, from,
          [&](char* to, const char* src, std::size_t n) { peer_copy<R, Op, S, M.far>(a, to, src, n, s); });
    }
    check_task<R, Op, S>(Backend::record(event(x.sent + a.message), s), "cudaEventRecord", a);
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_hollow(const A& a, stream_type s) {
  const int mb = a.microbatch;
  if constexpr (Op == op_kind::forward) {
    each<S>([&](auto from) {
      constexpr int F = decltype(from)::value;
      if constexpr (F == S - 1) {
        if constexpr (layout_.forward[ctpipe::detail::ix(F)] == handoff::ring_copy) consumed<F, 0>(a.message, s);
      } else if constexpr (sends(F, S)) {
        constexpr int k = crossing_of(F, S);
        if constexpr (layout_.skip_forward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          consumed<crossing_edge<k>, 0>(layout_.stages.skip_value_at[ctpipe::detail::ix(skip_key(k, mb))], s);
      }
    });
  } else if constexpr (Op == op_kind::backward || Op == op_kind::backward_input) {
    each<S>([&](auto to) {
      constexpr int T = decltype(to)::value;
      if constexpr (T == S - 1) {
        if constexpr (layout_.backward[ctpipe::detail::ix(T)] == handoff::ring_copy)
          transport_->template before_overwrite<T, 1>(a.out_message, s);
      } else if constexpr (sends(T, S)) {
        constexpr int k = crossing_of(T, S);
        if constexpr (layout_.skip_backward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          transport_->template before_overwrite<crossing_edge<k>, 1>(a.out_message, s);
      }
    });
    each<stage_count - 1 - S>([&](auto b) {
      constexpr int B = S + 1 + decltype(b)::value;
      if constexpr (B == S + 1) {
        if constexpr (layout_.backward[ctpipe::detail::ix(S)] == handoff::ring_copy) consumed<S, 1>(a.message, s);
      } else if constexpr (sends(S, B)) {
        constexpr int k = crossing_of(S, B);
        if constexpr (layout_.skip_backward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          consumed<crossing_edge<k>, 1>(layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, mb))], s);
      }
    });
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_forward(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::forward;
  constexpr auto u = ctpipe::detail::ix(S);
  const int mb = a.microbatch;
  char* const slot = slot_base<S>(a.stash);
  const auto local = [&](char* to, const char* from, std::size_t n) { copy<R, Op, S>(a, to, from, n, s); };
  before_slot_reuse<S>(s);
  // What the stage takes in: each earlier stage's message that it is sent.
  each<S>([&](auto from) {
    constexpr int F = decltype(from)::value;
    constexpr auto f = ctpipe::detail::ix(F);
    if constexpr (F == S - 1) {
      if constexpr (layout_.forward[f] == handoff::ring_copy) {
        copy_message<false, F, S>(mb, slot + go.inbox_at[u][f], graph_ring_forward<F>(a.message), local);
        if constexpr (only >= 0)
          consumed<F, 0>(a.message, s);
        else if (a.message < reused<F>)
          check_task<R, Op, S>(Backend::record(event(layout_.consumed_forward[f] + a.message), s), "cudaEventRecord",
                               a);
      } else {
        copy_message<false, F, S>(mb, slot + go.inbox_at[u][f],
                                  slot_base<F>(layout_.stash_of[f][ctpipe::detail::ix(mb)]) + go.sendbox_at[f][u],
                                  local);
      }
    } else if constexpr (sends(F, S)) {
      constexpr int k = crossing_of(F, S);
      constexpr auto q = ctpipe::detail::ix(k);
      if constexpr (layout_.skip_forward[q] == handoff::ring_copy) {
        const int n = layout_.stages.skip_value_at[ctpipe::detail::ix(skip_key(k, mb))];
        copy_message<false, F, S>(mb, slot + go.inbox_at[u][f], skip_ring_forward<k>(n), local);
        if constexpr (only >= 0)
          consumed<crossing_edge<k>, 0>(n, s);
        else if (n < skip_reused<k>)
          check_task<R, Op, S>(Backend::record(event(layout_.skip_consumed_forward[q] + n), s), "cudaEventRecord", a);
      } else {
        copy_message<false, F, S>(mb, slot + go.inbox_at[u][f],
                                  slot_base<F>(layout_.stash_of[f][ctpipe::detail::ix(mb)]) + go.sendbox_at[f][u],
                                  local);
      }
    }
  });
  // The layers, in order.
  const cuda::context c = context_of<R, S, Op>(a, s);
  each<layer_count<S>>([&](auto k) {
    constexpr int layer = first_layer<S> + decltype(k)::value;
    auto y = graph_y<S, layer>(a.stash);
    auto saved = graph_saved<S, layer>(a.stash);
    call_device<ctpipe::detail::forward_call>(model_.template layer<ctpipe::detail::ix(layer)>(), at_layer(c, layer),
                                              graph_x<S, layer>(a.stash, mb), y, saved);
  });
  // What it gives: a message for each later stage it sends one.
  each<stage_count - 1 - S>([&](auto b) {
    constexpr int B = S + 1 + decltype(b)::value;
    if constexpr (sends(S, B)) {
      each<wiring::wire_count(S, B)>([&](auto w) {
        constexpr int W = decltype(w)::value;
        constexpr edge e = wiring::at(wiring::wire_edge(S, B, W));
        char* from = e.producer < 0 ? model_input_part(mb, e.output)
                                    : slot + go.out_at[ctpipe::detail::ix(e.producer)][ctpipe::detail::ix(e.output)];
        copy<R, Op, S>(a, slot + go.sendbox_at[u][ctpipe::detail::ix(B)] + places::wire_offset(S, B, W), from,
                       used_of(e.bytes, e.token_bytes, mb), s);
      });
    }
  });
  if constexpr (forward_only && S == stage_count - 1) {
    constexpr int top = static_cast<int>(Model::size) - 1;
    finish_forward<R, S>(a, c, graph_y<S, top>(a.stash), graph_dy<S, top, false>(a.stash), s);
  }
  check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' forward (cudaGetLastError)", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, op_kind Op, int S, int A, class Args>
inline char* engine<Model, Stages, Loss, Backend, Layout, Transport>::gradient_message(const Args& a, stream_type s) {
  constexpr auto f = ctpipe::detail::ix(A), u = ctpipe::detail::ix(S);
  if constexpr (A == S - 1) {
    if constexpr (layout_.backward[f] == handoff::local_slot) {
      return graph_local_backward<A>(a.local_out);
    } else if constexpr (layout_.backward[f] == handoff::ring_direct) {
      if (a.out_message >= capacity<A>)
        check_task<R, Op, S>(Backend::wait(s, event(layout_.consumed_backward[f] + a.out_message - capacity<A>)),
                             "cudaStreamWaitEvent", a);
      return graph_ring_backward<A>(a.out_message);
    } else {
      // Process mode: the transport may still be sending the message written here last time.
      if constexpr (only >= 0) transport_->template before_overwrite<A, 1>(a.out_message, s);
      return scratch_base<S>() + go.outbox_at[u][f];
    }
  } else {
    constexpr int k = crossing_of(A, S);
    constexpr auto q = ctpipe::detail::ix(k);
    if constexpr (layout_.skip_backward[q] == handoff::local_slot) {
      return skip_local_backward<k>(layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, a.microbatch))]);
    } else if constexpr (layout_.skip_backward[q] == handoff::ring_direct) {
      if (a.out_message >= skip_capacity<k>)
        check_task<R, Op, S>(
            Backend::wait(s, event(layout_.skip_consumed_backward[q] + a.out_message - skip_capacity<k>)),
            "cudaStreamWaitEvent", a);
      return skip_ring_backward<k>(a.out_message);
    } else {
      if constexpr (only >= 0) transport_->template before_overwrite<crossing_edge<k>, 1>(a.out_message, s);
      return scratch_base<S>() + go.outbox_at[u][f];
    }
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, bool Input, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_backward(const A& a, stream_type s) {
  constexpr op_kind Op = Input ? op_kind::backward_input : op_kind::backward;
  constexpr auto u = ctpipe::detail::ix(S);
  const int mb = a.microbatch;
  char* const g = grads_base<S, Input>(a.stash);
  // The gradient messages this stage sends earlier stages, where they are written.
  std::array<char*, u + 1> out{};
  each<S>([&](auto to) {
    constexpr int T = decltype(to)::value;
    if constexpr (sends(T, S)) out[ctpipe::detail::ix(T)] = gradient_message<R, Op, S, T>(a, s);
  });
  // The gradient terms later stages sent, the farthest first.
  each<stage_count - 1 - S>([&](auto r) {
    constexpr int B = stage_count - 1 - decltype(r)::value;
    if constexpr (sends(S, B)) {
      // Where the message lies; and, read from a ring, the message's number there (its edge's,
      // in process mode) and its ring's consumed event (-1 where the slot is not written again).
      const char* from = nullptr;
      int n = -1, consumed_event = -1;
      // (Process mode: the message's FIFO, where it came through a ring; -1 where it did not.)
      constexpr int fifo = B == S + 1 ? (layout_.backward[u] == handoff::local_slot ? -1 : S)
                           : layout_.skip_backward[ctpipe::detail::ix(crossing_of(S, B))] == handoff::local_slot
                               ? -1
                               : crossing_edge<crossing_of(S, B)>;
      if constexpr (B == S + 1) {
        if constexpr (layout_.backward[u] == handoff::local_slot) {
          from = graph_local_backward<S>(a.local_in);
        } else {
          from = graph_ring_backward<S>(n = a.message);
          if (n < reused<S>) consumed_event = layout_.consumed_backward[u] + n;
        }
      } else {
        constexpr int k = crossing_of(S, B);
        constexpr auto q = ctpipe::detail::ix(k);
        const int at = layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, mb))];
        if constexpr (layout_.skip_backward[q] == handoff::local_slot) {
          from = skip_local_backward<k>(at);
        } else {
          from = skip_ring_backward<k>(n = at);
          if (n < skip_reused<k>) consumed_event = layout_.skip_consumed_backward[q] + n;
        }
      }
      each<wiring::term_count(B, S)>([&](auto t) {
        constexpr int T = decltype(t)::value, i = wiring::term_edge(B, S, T);
        constexpr edge e = wiring::at(i);
        char* to = g + go.grad_at[ctpipe::detail::ix(e.producer)][ctpipe::detail::ix(e.output)];
        const char* term = from + places::term_offset(B, S, T);
        if constexpr (wiring::term_starts(B, S, T))
          copy<R, Op, S>(a, to, term, used_of(e.bytes, e.token_bytes, mb), s);
        else
          add<R, Op, S, edge_tensor_t<i>>(a, to, term, s);
      });
      if constexpr (only >= 0) {
        if constexpr (fifo >= 0) consumed<fifo, 1>(n, s);
      } else if (consumed_event >= 0) {
        check_task<R, Op, S>(Backend::record(event(consumed_event), s), "cudaEventRecord", a);
      }
    }
  });
  const cuda::context c = context_of<R, S, Op>(a, s);
  if constexpr (S == stage_count - 1) {
    constexpr int top = static_cast<int>(Model::size) - 1;
    auto dy = graph_dy<S, top, Input>(a.stash);
    loss_(at_layer(c, static_cast<int>(Model::size)), graph_y<S, top>(a.stash), targets_[ctpipe::detail::ix(mb)], dy,
          reinterpret_cast<double*>(base<S>() + mem.losses[0]) + mb);
  }
  // The layers from the top down.
  each<layer_count<S>>([&](auto r) {
    constexpr int layer = first_layer<S> + layer_count<S> - 1 - decltype(r)::value;
    using L = layer_t<layer>;
    // Where each input part's gradient goes: in place where it starts its sum, else the scratch.
    const auto place = [&](auto i) -> char* {
      constexpr int ei = wiring::edge_of(layer, decltype(i)::value);
      constexpr edge e = wiring::at(ei);
      if constexpr (e.producer < 0 || !wiring::contribution_starts(ei))
        return scratch_base<S>() + go.dx_at[ctpipe::detail::ix(layer)][ctpipe::detail::ix(e.input)];
      else if constexpr (wiring::crosses(e))
        return std::get<ctpipe::detail::ix(wiring::producer_stage(e))>(out) +
               places::term_offset(S, wiring::producer_stage(e), wiring::term_of(ei));
      else
        return g + go.grad_at[ctpipe::detail::ix(e.producer)][ctpipe::detail::ix(e.output)];
    };
    auto dx = parts_view<typename L::input_type>(place);
    const auto x = graph_x<S, layer>(a.stash, mb);
    const auto y = graph_y<S, layer>(a.stash);
    const auto dy = graph_dy<S, layer, Input>(a.stash);
    auto saved = graph_saved<S, layer>(a.stash);
    auto& l = model_.template layer<ctpipe::detail::ix(layer)>();
    if constexpr (Input && device_splittable_layer<L>)
      call_device<ctpipe::detail::backward_input_call>(l, at_layer(c, layer), x, y, saved, dy, dx);
    else
      call_device<ctpipe::detail::backward_call>(l, at_layer(c, layer), x, y, std::as_const(saved), dy, dx);
    // Each input part that does not start its sum is added to it.
    each<static_cast<int>(parts_v<typename L::input_type>)>([&](auto in) {
      constexpr int ei = wiring::edge_of(layer, decltype(in)::value);
      constexpr edge e = wiring::at(ei);
      if constexpr (e.producer >= 0 && !wiring::contribution_starts(ei)) {
        char* const from = scratch_base<S>() + go.dx_at[ctpipe::detail::ix(layer)][ctpipe::detail::ix(e.input)];
        if constexpr (wiring::crosses(e))
          add<R, Op, S, edge_tensor_t<ei>>(a,
                                           std::get<ctpipe::detail::ix(wiring::producer_stage(e))>(out) +
                                               places::term_offset(S, wiring::producer_stage(e), wiring::term_of(ei)),
                                           from, s);
        else
          add<R, Op, S, edge_tensor_t<ei>>(
              a, g + go.grad_at[ctpipe::detail::ix(e.producer)][ctpipe::detail::ix(e.output)], from, s);
      }
    });
  });
  check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward (cudaGetLastError)", a);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int S, class A>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::graph_weight(const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::backward_weight;
  if constexpr (any_splits<S>(std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{})) {
    const cuda::context c = context_of<R, S, Op>(a, s);
    each<layer_count<S>>([&](auto k) {
      constexpr int layer = first_layer<S> + decltype(k)::value;
      using L = layer_t<layer>;
      if constexpr (device_splittable_layer<L>) {
        const auto y = graph_y<S, layer>(a.stash);
        const auto saved = graph_saved<S, layer>(a.stash);
        const auto dy = graph_dy<S, layer, true>(a.stash);
        call_device<ctpipe::detail::backward_weight_call>(model_.template layer<ctpipe::detail::ix(layer)>(),
                                                          at_layer(c, layer), graph_x<S, layer>(a.stash, a.microbatch),
                                                          y, saved, dy);
      }
    });
    check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward_weight (cudaGetLastError)", a);
  }
}

}  // namespace ctpipe::cuda::detail
