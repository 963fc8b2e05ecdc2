// A graph model's tasks in the CUDA engine: a part of the engine of its own (cuda/detail/engine.hpp
// calls it for a model that is not a chain, or passes several tensors between layers; nothing of it
// is instantiated for a chain). It holds no state: it reaches the engine's buffers, streams, layers
// and transport through the engine it is given (a friend).
//
// Every message is a copy: a stage's F copies what it takes in into its stash slot (from the
// producer's slot on one device, from a ring across devices), gathers each layer's input parts from
// there and from its own layers' outputs, and packs a message for each later stage that reads
// something it made. A B or I takes the gradient terms later stages sent (the farthest first), then
// runs the layers from the top down; each input part's gradient starts its sum in place or is added
// to it (Backend::add), in the sequential step's order (exec/detail/graph_stages.hpp); where the
// tensors lie: cuda/detail/graph_layout.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine_parts.hpp>
#include <ctpipe/cuda/detail/graph_layout.hpp>
#include <ctpipe/cuda/layer.hpp>  // call_device
#include <ctpipe/cuda/plan.hpp>   // handoff
#include <ctpipe/detail/each.hpp>
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/graph_walk.hpp>
#include <ctpipe/exec/detail/op_switch.hpp>  // route
#include <ctpipe/model/graph.hpp>            // edge

namespace ctpipe::cuda::detail {

template <class E, model_type Model, auto Stages, class Backend>
class stage_parts<E, Model, Stages, Backend>::graph {
  template <int K>
  static constexpr int skip_capacity = E::template skip_capacity<K>;
  template <int K>
  static constexpr int crossing_edge = E::template crossing_edge<K>;
  static constexpr int crossing_of(int a, int b) { return E::crossing_of(a, b); }
  // Stage A sends stage B a message (its neighbour's, or a crossing's).
  static constexpr bool sends(int a, int b) { return walk::sends(a, b); }
  template <int K>
  static constexpr int skip_reused = microbatches > skip_capacity<K> ? microbatches - skip_capacity<K> : 0;
  static constexpr int skip_key(int k, int mb) { return k * microbatches + mb; }
  template <int I>
  using edge_tensor_t = typename ctpipe::detail::graph_stage_types<Model, Stages>::template edge_tensor_t<I>;
  template <int Layer>
  using layer_t = typename Model::template layer_type<ctpipe::detail::ix(Layer)>;

 public:
  using wiring = ctpipe::detail::graph_wiring<Model, Stages>;
  using walk = ctpipe::detail::graph_walk<Model, Stages, layout_.stages.skips>;
  using places = graph_places<Model, Stages>;
  static constexpr auto& go = places::offsets;

  // The op switch's compute ops and sends for a graph stage, on stream s; what the transport needs
  // of a compute op in a hollow step (process mode, fail_task).
  template <int R, int S, class A>
  static void forward(E& en, const A& a, stream_type s);
  // B (Input false) or I (Input true). An I's gradients stay in its stash slot's set for the W.
  template <int R, int S, bool Input, class A>
  static void backward(E& en, const A& a, stream_type s);
  // W: every layer that splits its backward adds its weight gradients.
  template <int R, int S, class A>
  static void weight(E& en, const A& a, stream_type s);
  // A message of route M: a value from the producer's stash slot, a gradient from the stage's
  // scratch; through the transport (process mode), or copied into the receiver's ring where the
  // hand-off is a copy (once its slot is free), then its sent event recorded.
  template <int R, ctpipe::detail::route M, class A>
  static void send(E& en, const A& a, stream_type s);
  template <int R, op_kind Op, int S, class A>
  static void hollow(E& en, const A& a, stream_type s);

  // Boundary B's rings, sized by its messages, and crossing K's: message n's slot (A -> B) and its
  // gradient message's (B -> A).
  template <int B>
  static char* ring_forward(const E& en, int n) {
    return en.template base<B + 1>() + mem.ring_forward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(n % capacity<B>) * go.value_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }
  template <int B>
  static char* ring_backward(const E& en, int n) {
    return en.template base<B>() + mem.ring_backward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(n % capacity<B>) * go.gradient_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }
  template <int K>
  static char* skip_ring_forward(const E& en, int n) {
    constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
    return en.template base<r.to>() + mem.skip_ring_forward_base[ctpipe::detail::ix(K)] +
           ctpipe::detail::ix(n % skip_capacity<K>) *
               go.value_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
  }
  template <int K>
  static char* skip_ring_backward(const E& en, int n) {
    constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
    return en.template base<r.from>() + mem.skip_ring_backward_base[ctpipe::detail::ix(K)] +
           ctpipe::detail::ix(n % skip_capacity<K>) *
               go.gradient_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
  }

 private:
  template <int S>
  static char* slot_base(const E& en, int slot) {
    return en.template base<S>() + mem.stash_base[ctpipe::detail::ix(S)] +
           ctpipe::detail::ix(slot) * mem.stash_stride[ctpipe::detail::ix(S)];
  }
  template <int S, bool Input>
  static char* grads_base(const E& en, int slot) {
    constexpr auto u = ctpipe::detail::ix(S);
    if constexpr (Input)
      return en.template base<S>() + mem.grad_stash_base[u] + ctpipe::detail::ix(slot) * mem.grad_stash_stride[u];
    else
      return en.template base<S>() + mem.grads_base[u];
  }
  template <int S>
  static char* scratch_base(const E& en) {
    return en.template base<S>() + mem.scratch_base[ctpipe::detail::ix(S)];
  }
  template <int K>
  static char* skip_local_backward(const E& en, int slot) {
    constexpr skip_route r = layout_.stages.skips[ctpipe::detail::ix(K)];
    return en.template base<r.from>() + mem.skip_local_backward_base[ctpipe::detail::ix(K)] +
           ctpipe::detail::ix(slot) * go.gradient_bytes[ctpipe::detail::ix(r.from)][ctpipe::detail::ix(r.to)];
  }
  template <int B>
  static char* local_backward(const E& en, int slot) {
    return en.template base<B>() + mem.local_backward_base[ctpipe::detail::ix(B)] +
           ctpipe::detail::ix(slot) * go.gradient_bytes[ctpipe::detail::ix(B)][ctpipe::detail::ix(B + 1)];
  }

  // Layer `Layer` (of stage S) for the microbatch in stash slot `slot`: its input parts, its output
  // parts, their gradients (an I's kept set, or a B's), its saved state.
  template <int S, int Layer>
  static auto x_view(const E& en, int slot, int mb) -> typename layer_t<Layer>::input_type;
  template <int S, int Layer>
  static typename layer_t<Layer>::output_type y_view(const E& en, int slot) {
    return parts_view<typename layer_t<Layer>::output_type>([&](auto o) {
      return slot_base<S>(en, slot) + go.out_at[ctpipe::detail::ix(Layer)][ctpipe::detail::ix(o.value)];
    });
  }
  template <int S, int Layer, bool Input>
  static typename layer_t<Layer>::output_type dy_view(const E& en, int slot) {
    return parts_view<typename layer_t<Layer>::output_type>([&](auto o) {
      return grads_base<S, Input>(en, slot) + go.grad_at[ctpipe::detail::ix(Layer)][ctpipe::detail::ix(o.value)];
    });
  }
  template <int S, int Layer>
  static auto state_view(const E& en, int slot);
  // Part o of microbatch mb's model input.
  static char* input_part(const E& en, int mb, int o);

  // A message between stages A < B (Gradient: the gradient message from B to A), copied for
  // microbatch mb through one(to, from, bytes): in one copy where none of its tensors is
  // token-major or while capturing, else each tensor's used bytes.
  template <bool Gradient, int A, int B, class One>
  static void copy_message(const E& en, int mb, char* to, const char* from, One&& one);
  template <int R, op_kind Op, int S, class A>
  static void copy(E& en, const A& a, void* to, const void* from, std::size_t bytes, stream_type s) {
    if (bytes > 0)
      E::template check_task<R, Op, S>(
          Backend::memcpy_async(to, en.on(device_of<S>), from, en.on(device_of<S>), bytes, s), "cudaMemcpyAsync", a);
  }
  // A copy from stage S's device to stage T's (a peer copy where they differ).
  template <int R, op_kind Op, int S, int T, class A>
  static void peer_copy(E&, const A& a, void* to, const void* from, std::size_t bytes, stream_type s) {
    if (bytes > 0)
      E::template check_task<R, Op, S>(Backend::memcpy_async(to, device_of<T>, from, device_of<S>, bytes, s),
                                       "cudaMemcpyPeerAsync", a);
  }
  // to += from, as tensor type T's elements.
  template <int R, op_kind Op, int S, class T, class A>
  static void add(E& en, const A& a, void* to, const void* from, stream_type s);
  // Where stage S's B or I writes its gradient message for stage A: a same-rank slot, the
  // receiver's ring slot written in place (once the receiver has read what it held), or the
  // stage's scratch, which the send copies out.
  template <int R, op_kind Op, int S, int A, class Args>
  static char* gradient_message(E& en, const Args& a, stream_type s);
};

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int Layer>
inline auto stage_parts<E, Model, Stages, Backend>::graph::x_view(const E& en, int slot, int mb) ->
    typename layer_t<Layer>::input_type {
  return parts_view<typename layer_t<Layer>::input_type>([&](auto i) -> char* {
    constexpr ctpipe::detail::part_link l = wiring::link(Layer, decltype(i)::value);
    if constexpr (l.stage >= 0)
      return slot_base<S>(en, slot) + go.inbox_at[ctpipe::detail::ix(S)][ctpipe::detail::ix(l.stage)] +
             places::wire_offset(l.stage, S, l.wire);
    else if constexpr (l.layer < 0)
      return input_part(en, mb, l.output);
    else
      return slot_base<S>(en, slot) + go.out_at[ctpipe::detail::ix(l.layer)][ctpipe::detail::ix(l.output)];
  });
}

template <class E, model_type Model, auto Stages, class Backend>
template <int S, int Layer>
inline auto stage_parts<E, Model, Stages, Backend>::graph::state_view(const E& en, int slot) {
  if constexpr (has_saved_state<layer_t<Layer>>)
    return E::template view<saved_t<layer_t<Layer>>>(slot_base<S>(en, slot) + go.saved_at[ctpipe::detail::ix(Layer)]);
  else
    return no_saved_state{};
}

template <class E, model_type Model, auto Stages, class Backend>
inline char* stage_parts<E, Model, Stages, Backend>::graph::input_part(const E& en, int mb, int o) {
  char* p = nullptr;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((o == static_cast<int>(I) ? (p = reinterpret_cast<char*>(part<I>(en.inputs_[ctpipe::detail::ix(mb)]).data)) : p),
     ...);
  }
  (std::make_index_sequence<parts_v<typename Model::input_type>>{});
  return p;
}

template <class E, model_type Model, auto Stages, class Backend>
template <bool Gradient, int A, int B, class One>
inline void stage_parts<E, Model, Stages, Backend>::graph::copy_message(const E& en, int mb, char* to, const char* from,
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
    if (!en.capturing_) {
      ctpipe::detail::each<count>([&](auto w) {
        constexpr int W = decltype(w)::value;
        constexpr edge e = wiring::at(Gradient ? wiring::term_edge(B, A, W) : wiring::wire_edge(A, B, W));
        constexpr std::size_t at = Gradient ? places::term_offset(B, A, W) : places::wire_offset(A, B, W);
        one(to + at, from + at, en.used_of(e.bytes, e.token_bytes, mb));
      });
      return;
    }
  }
  one(to, from, whole);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, op_kind Op, int S, class T, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::add(E& en, const A& a, void* to, const void* from,
                                                               stream_type s) {
  using V = typename T::value_type;
  E::template check_task<R, Op, S>(Backend::add(en.adders_[ctpipe::detail::ix(device_of<S>)], static_cast<V*>(to),
                                                static_cast<const V*>(from), T::bytes / sizeof(V), s),
                                   "cuBLAS axpy (a gradient's sum)", a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, ctpipe::detail::route M, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::send(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_of(M);
  constexpr int S = M.here;
  constexpr auto x = E::template facts_of<M>;
  constexpr auto h = ctpipe::detail::ix(S), f = ctpipe::detail::ix(M.far);
  constexpr auto lo = ctpipe::detail::ix(M.lower), hi = ctpipe::detail::ix(M.upper);
  char* from = nullptr;
  if constexpr (M.backward)
    from = scratch_base<S>(en) + go.outbox_at[h][f];
  else if constexpr (M.skip)
    from = slot_base<S>(en, layout_.stash_of[h][ctpipe::detail::ix(a.microbatch)]) + go.sendbox_at[h][f];
  else
    from = slot_base<S>(en, a.stash) + go.sendbox_at[h][f];
  if constexpr (only >= 0) {
    const std::size_t whole = M.backward ? go.gradient_bytes[lo][hi] : go.value_bytes[lo][hi];
    en.transport_->template send<x.edge, M.backward>(
        a.message, from, en.template transport_bytes<x.edge, M.backward>(a.message, whole), s);
  } else {
    if constexpr (x.how == handoff::ring_copy) {
      if (a.message >= x.capacity)
        E::template check_task<R, Op, S>(Backend::wait(s, en.event(x.consumed + a.message - x.capacity)),
                                         "cudaStreamWaitEvent", a);
      char* ring = nullptr;
      if constexpr (M.skip)
        ring =
            M.backward ? skip_ring_backward<x.crossing>(en, a.message) : skip_ring_forward<x.crossing>(en, a.message);
      else
        ring = M.backward ? ring_backward<M.lower>(en, a.message) : ring_forward<M.lower>(en, a.message);
      copy_message<M.backward, M.lower, M.upper>(
          en, a.microbatch, ring, from,
          [&](char* to, const char* src, std::size_t n) { peer_copy<R, Op, S, M.far>(en, a, to, src, n, s); });
    }
    E::template check_task<R, Op, S>(Backend::record(en.event(x.sent + a.message), s), "cudaEventRecord", a);
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, op_kind Op, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::hollow(E& en, const A& a, stream_type s) {
  const int mb = a.microbatch;
  if constexpr (Op == op_kind::forward) {
    ctpipe::detail::each<S>([&](auto from) {
      constexpr int F = decltype(from)::value;
      if constexpr (F == S - 1) {
        if constexpr (layout_.forward[ctpipe::detail::ix(F)] == handoff::ring_copy)
          en.template consumed<F, 0>(a.message, s);
      } else if constexpr (sends(F, S)) {
        constexpr int k = crossing_of(F, S);
        if constexpr (layout_.skip_forward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          en.template consumed<crossing_edge<k>, 0>(layout_.stages.skip_value_at[ctpipe::detail::ix(skip_key(k, mb))],
                                                    s);
      }
    });
  } else if constexpr (Op == op_kind::backward || Op == op_kind::backward_input) {
    ctpipe::detail::each<S>([&](auto to) {
      constexpr int T = decltype(to)::value;
      if constexpr (T == S - 1) {
        if constexpr (layout_.backward[ctpipe::detail::ix(T)] == handoff::ring_copy)
          en.transport_->template before_overwrite<T, 1>(a.out_message, s);
      } else if constexpr (sends(T, S)) {
        constexpr int k = crossing_of(T, S);
        if constexpr (layout_.skip_backward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          en.transport_->template before_overwrite<crossing_edge<k>, 1>(a.out_message, s);
      }
    });
    ctpipe::detail::each<stage_count - 1 - S>([&](auto b) {
      constexpr int B = S + 1 + decltype(b)::value;
      if constexpr (B == S + 1) {
        if constexpr (layout_.backward[ctpipe::detail::ix(S)] == handoff::ring_copy)
          en.template consumed<S, 1>(a.message, s);
      } else if constexpr (sends(S, B)) {
        constexpr int k = crossing_of(S, B);
        if constexpr (layout_.skip_backward[ctpipe::detail::ix(k)] == handoff::ring_copy)
          en.template consumed<crossing_edge<k>, 1>(
              layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, mb))], s);
      }
    });
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::forward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::forward;
  constexpr auto u = ctpipe::detail::ix(S);
  const int mb = a.microbatch;
  char* const slot = slot_base<S>(en, a.stash);
  const auto local = [&](char* to, const char* from, std::size_t n) { copy<R, Op, S>(en, a, to, from, n, s); };
  en.template before_slot_reuse<S>(s);
  const cuda::context c = en.template context_of<R, S, Op>(a, s);
  walk::template forward<S>(
      [&](auto from) {  // the message of an earlier stage, into the stash slot
        constexpr int F = decltype(from)::value;
        constexpr auto f = ctpipe::detail::ix(F);
        if constexpr (F == S - 1) {
          if constexpr (layout_.forward[f] == handoff::ring_copy) {
            copy_message<false, F, S>(en, mb, slot + go.inbox_at[u][f], ring_forward<F>(en, a.message), local);
            if constexpr (only >= 0)
              en.template consumed<F, 0>(a.message, s);
            else if (a.message < reused<F>)
              E::template check_task<R, Op, S>(Backend::record(en.event(layout_.consumed_forward[f] + a.message), s),
                                               "cudaEventRecord", a);
          } else {
            copy_message<false, F, S>(
                en, mb, slot + go.inbox_at[u][f],
                slot_base<F>(en, layout_.stash_of[f][ctpipe::detail::ix(mb)]) + go.sendbox_at[f][u], local);
          }
        } else {
          constexpr int k = crossing_of(F, S);
          constexpr auto q = ctpipe::detail::ix(k);
          if constexpr (layout_.skip_forward[q] == handoff::ring_copy) {
            const int n = layout_.stages.skip_value_at[ctpipe::detail::ix(skip_key(k, mb))];
            copy_message<false, F, S>(en, mb, slot + go.inbox_at[u][f], skip_ring_forward<k>(en, n), local);
            if constexpr (only >= 0)
              en.template consumed<crossing_edge<k>, 0>(n, s);
            else if (n < skip_reused<k>)
              E::template check_task<R, Op, S>(Backend::record(en.event(layout_.skip_consumed_forward[q] + n), s),
                                               "cudaEventRecord", a);
          } else {
            copy_message<false, F, S>(
                en, mb, slot + go.inbox_at[u][f],
                slot_base<F>(en, layout_.stash_of[f][ctpipe::detail::ix(mb)]) + go.sendbox_at[f][u], local);
          }
        }
      },
      [&] {
        walk::template each_layer<S>([&](auto layer) {
          constexpr int L = decltype(layer)::value;
          auto y = y_view<S, L>(en, a.stash);
          auto saved = state_view<S, L>(en, a.stash);
          call_device<ctpipe::detail::forward_call>(en.model_.template layer<ctpipe::detail::ix(L)>(),
                                                    E::at_layer(c, L), x_view<S, L>(en, a.stash, mb), y, saved);
        });
      },
      [&](auto to, auto w, auto l) {  // a tensor of the message to a later stage
        constexpr int B = decltype(to)::value, W = decltype(w)::value;
        constexpr ctpipe::detail::part_link from = decltype(l)::value;
        constexpr edge e = wiring::at(from.edge);
        char* src = from.layer < 0 ? input_part(en, mb, from.output)
                                   : slot + go.out_at[ctpipe::detail::ix(from.layer)][ctpipe::detail::ix(from.output)];
        copy<R, Op, S>(en, a, slot + go.sendbox_at[u][ctpipe::detail::ix(B)] + places::wire_offset(S, B, W), src,
                       en.used_of(e.bytes, e.token_bytes, mb), s);
      });
  if constexpr (forward_only && S == stage_count - 1) {
    constexpr int top = static_cast<int>(Model::size) - 1;
    en.template finish_forward<R, S>(a, c, y_view<S, top>(en, a.stash), dy_view<S, top, false>(en, a.stash), s);
  }
  E::template check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' forward (cudaGetLastError)",
                                   a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, op_kind Op, int S, int A, class Args>
inline char* stage_parts<E, Model, Stages, Backend>::graph::gradient_message(E& en, const Args& a, stream_type s) {
  constexpr auto f = ctpipe::detail::ix(A), u = ctpipe::detail::ix(S);
  if constexpr (A == S - 1) {
    if constexpr (layout_.backward[f] == handoff::local_slot) {
      return local_backward<A>(en, a.local_out);
    } else if constexpr (layout_.backward[f] == handoff::ring_direct) {
      if (a.out_message >= capacity<A>)
        E::template check_task<R, Op, S>(
            Backend::wait(s, en.event(layout_.consumed_backward[f] + a.out_message - capacity<A>)),
            "cudaStreamWaitEvent", a);
      return ring_backward<A>(en, a.out_message);
    } else {
      // Process mode: the transport may still be sending the message written here last time.
      if constexpr (only >= 0) en.transport_->template before_overwrite<A, 1>(a.out_message, s);
      return scratch_base<S>(en) + go.outbox_at[u][f];
    }
  } else {
    constexpr int k = crossing_of(A, S);
    constexpr auto q = ctpipe::detail::ix(k);
    if constexpr (layout_.skip_backward[q] == handoff::local_slot) {
      return skip_local_backward<k>(en, layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, a.microbatch))]);
    } else if constexpr (layout_.skip_backward[q] == handoff::ring_direct) {
      if (a.out_message >= skip_capacity<k>)
        E::template check_task<R, Op, S>(
            Backend::wait(s, en.event(layout_.skip_consumed_backward[q] + a.out_message - skip_capacity<k>)),
            "cudaStreamWaitEvent", a);
      return skip_ring_backward<k>(en, a.out_message);
    } else {
      if constexpr (only >= 0) en.transport_->template before_overwrite<crossing_edge<k>, 1>(a.out_message, s);
      return scratch_base<S>(en) + go.outbox_at[u][f];
    }
  }
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, bool Input, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::backward(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = Input ? op_kind::backward_input : op_kind::backward;
  constexpr auto u = ctpipe::detail::ix(S);
  const int mb = a.microbatch;
  char* const g = grads_base<S, Input>(en, a.stash);
  // The gradient messages this stage sends earlier stages, where they are written.
  std::array<char*, u + 1> out{};
  ctpipe::detail::each<S>([&](auto to) {
    constexpr int T = decltype(to)::value;
    if constexpr (sends(T, S)) out[ctpipe::detail::ix(T)] = gradient_message<R, Op, S, T>(en, a, s);
  });
  const cuda::context c = en.template context_of<R, S, Op>(a, s);
  // Where input part P of layer L (one a layer made) sends its gradient: a term of the message to
  // the stage that made it, or the gradient of that layer's output.
  const auto destination = [&](auto l) -> char* {
    constexpr ctpipe::detail::part_link to = decltype(l)::value;
    if constexpr (to.stage >= 0)
      return std::get<ctpipe::detail::ix(to.stage)>(out) + places::term_offset(S, to.stage, to.term);
    else
      return g + go.grad_at[ctpipe::detail::ix(to.layer)][ctpipe::detail::ix(to.output)];
  };
  walk::template backward<S>(
      [&](auto sender) {  // the gradient terms a later stage sent
        constexpr int B = decltype(sender)::value;
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
            from = local_backward<S>(en, a.local_in);
          } else {
            from = ring_backward<S>(en, n = a.message);
            if (n < reused<S>) consumed_event = layout_.consumed_backward[u] + n;
          }
        } else {
          constexpr int k = crossing_of(S, B);
          constexpr auto q = ctpipe::detail::ix(k);
          const int at = layout_.stages.skip_gradient_at[ctpipe::detail::ix(skip_key(k, mb))];
          if constexpr (layout_.skip_backward[q] == handoff::local_slot) {
            from = skip_local_backward<k>(en, at);
          } else {
            from = skip_ring_backward<k>(en, n = at);
            if (n < skip_reused<k>) consumed_event = layout_.skip_consumed_backward[q] + n;
          }
        }
        walk::template each_term<B, S>([&](auto t, auto l) {
          constexpr ctpipe::detail::part_link to = decltype(l)::value;
          constexpr edge e = wiring::at(to.edge);
          char* dst = g + go.grad_at[ctpipe::detail::ix(to.layer)][ctpipe::detail::ix(to.output)];
          const char* term = from + places::term_offset(B, S, decltype(t)::value);
          if constexpr (to.starts)
            copy<R, Op, S>(en, a, dst, term, en.used_of(e.bytes, e.token_bytes, mb), s);
          else
            add<R, Op, S, edge_tensor_t<to.edge>>(en, a, dst, term, s);
        });
        if constexpr (only >= 0) {
          if constexpr (fifo >= 0) en.template consumed<fifo, 1>(n, s);
        } else if (consumed_event >= 0) {
          E::template check_task<R, Op, S>(Backend::record(en.event(consumed_event), s), "cudaEventRecord", a);
        }
      },
      [&](auto last) {
        constexpr int top = static_cast<int>(Model::size) - 1;
        constexpr int T = decltype(last)::value;
        auto dy = dy_view<T, top, Input>(en, a.stash);
        en.loss_(E::at_layer(c, static_cast<int>(Model::size)), y_view<T, top>(en, a.stash),
                 en.targets_[ctpipe::detail::ix(mb)], dy,
                 reinterpret_cast<double*>(en.template base<T>() + mem.losses[0]) + mb);
      },
      [&](auto layer) {
        constexpr int L = decltype(layer)::value;
        using layer_type = layer_t<L>;
        // Each input part's gradient: in place where it starts its sum, else into the scratch.
        const auto place = [&](auto i) -> char* {
          constexpr ctpipe::detail::part_link l = wiring::link(L, decltype(i)::value);
          if constexpr (l.layer < 0 || !l.starts)
            return scratch_base<S>(en) + go.dx_at[ctpipe::detail::ix(L)][ctpipe::detail::ix(decltype(i)::value)];
          else
            return destination(ctpipe::detail::link_constant<l>{});
        };
        auto dx = parts_view<typename layer_type::input_type>(place);
        const auto x = x_view<S, L>(en, a.stash, mb);
        const auto y = y_view<S, L>(en, a.stash);
        const auto dy = dy_view<S, L, Input>(en, a.stash);
        auto saved = state_view<S, L>(en, a.stash);
        auto& m = en.model_.template layer<ctpipe::detail::ix(L)>();
        if constexpr (Input && device_splittable_layer<layer_type>)
          call_device<ctpipe::detail::backward_input_call>(m, E::at_layer(c, L), x, y, saved, dy, dx);
        else
          call_device<ctpipe::detail::backward_call>(m, E::at_layer(c, L), x, y, std::as_const(saved), dy, dx);
      },
      [&](auto layer, auto p, auto l) {  // a part that does not start its sum is added to it
        constexpr int L = decltype(layer)::value;
        if constexpr (!decltype(l)::value.starts)
          add<R, Op, S, edge_tensor_t<decltype(l)::value.edge>>(
              en, a, destination(l),
              scratch_base<S>(en) + go.dx_at[ctpipe::detail::ix(L)][ctpipe::detail::ix(decltype(p)::value)], s);
      });
  E::template check_task<R, Op, S>(Backend::last_error(), "a kernel launch of the layers' backward (cudaGetLastError)",
                                   a);
}

template <class E, model_type Model, auto Stages, class Backend>
template <int R, int S, class A>
inline void stage_parts<E, Model, Stages, Backend>::graph::weight(E& en, const A& a, stream_type s) {
  constexpr op_kind Op = op_kind::backward_weight;
  if constexpr (E::template any_splits<S>(std::make_index_sequence<ctpipe::detail::ix(layer_count<S>)>{})) {
    const cuda::context c = en.template context_of<R, S, Op>(a, s);
    ctpipe::detail::each<layer_count<S>>([&](auto k) {
      constexpr int layer = first_layer<S> + decltype(k)::value;
      using L = layer_t<layer>;
      if constexpr (device_splittable_layer<L>) {
        const auto y = y_view<S, layer>(en, a.stash);
        const auto saved = state_view<S, layer>(en, a.stash);
        const auto dy = dy_view<S, layer, true>(en, a.stash);
        call_device<ctpipe::detail::backward_weight_call>(en.model_.template layer<ctpipe::detail::ix(layer)>(),
                                                          E::at_layer(c, layer),
                                                          x_view<S, layer>(en, a.stash, a.microbatch), y, saved, dy);
      }
    });
    E::template check_task<R, Op, S>(Backend::last_error(),
                                     "a kernel launch of the layers' backward_weight (cudaGetLastError)", a);
  }
}

}  // namespace ctpipe::cuda::detail
