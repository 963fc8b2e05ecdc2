// A bidirectional table's mirrors (dualpipe) in the CUDA engine: a part of the engine of its own
// (cuda/detail/engine.hpp holds one, empty where the table is not bidirectional), with its events,
// buffers and sums. It reaches the engine's streams, adders, transport and models through the
// engine it is given (a friend).
//
// Model stage J runs twice: as stage J of the first chain and stage chain_length + J of the second.
// Once both copies have run their last B or W of the step, each of the stage's layers gets the sum
// of the two copies' gradients (first plus second: one IEEE addition per element, the same bits
// whichever is added to which), in both copies.
//
// One process (the CUDA executor; its second chain's layers in a second model, the mirror): the
// rank whose such task comes last in the issue order sums (the executor says where:
// make_mirror_points), after waiting for the other's event; a copy on another device is brought
// next to its own first (a scratch of the stage's largest layer on each device).
//
// A process per rank (the NCCL executor, the MPI executor's device path): this process holds model
// stages `only` and chain_length - 1 - only, each in its own model, and so does the process of
// rank chain_length - 1 - only. The two sum both stages' layers over their pair's communicator
// (Transport::sum_pair: an all-reduce of two, the same bits on both), the lower model stage first
// on both, each once this process's copy is final (a transport whose groups_at_end holds: once
// every task has been issued); then, with replicas, each layer across them (the copies first, then
// the replicas).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <ctpipe/config.hpp>        // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
class mirror_sums {
  using layout_type = CTPIPE_NTTP_TYPE(Layout);
  // (Read through a constant of its own, as the engine does: clang 14.)
  static constexpr auto layout_ = Layout;
  static constexpr int ranks = static_cast<int>(layout_type::ranks);
  static constexpr int only = Transport::rank;
  static constexpr int chain_length = layout_.stages.chain_length;
  static constexpr bool mirrored = chain_length != static_cast<int>(layout_type::stage_count);
  static constexpr std::size_t slots = mirrored && only < 0 ? ctpipe::detail::ix(chain_length) : 0;

 public:
  // One process, at construction: each model stage's events and scratch.
  template <class E>
  void set_up(E& e) {
    ctpipe::detail::check_mirror(e.model_, *e.mirror_, Transport::tag::name);
    [&]<std::size_t... J>(std::index_sequence<J...>) { (set_up_stage<static_cast<int>(J)>(e), ...); }
    (std::make_index_sequence<ctpipe::detail::ix(chain_length)>{});
  }
  // One process: after a task of rank R (current device: R's), record the events of the model
  // stages in `record` (bit J: model stage J), and sum those in `sum`, on R's stream.
  template <int R, class E>
  void after_tasks(E& e, std::uint32_t record, std::uint32_t sum);
  // Process mode: this rank's copy of stage S is final on its stream (its last B or W of S has
  // been issued). Sums what can go now, in model stage order.
  template <int S, class E>
  void final(E& e) {
    ready_ |= 1u << (S % chain_length);
    if constexpr (!Transport::groups_at_end) sum_ready(e);
  }
  template <class E>
  void sum_ready(E& e) {
    ctpipe::detail::start_in_order<held_stages>(ready_, done_, [&]<int J>() { sum_in_process<J>(e); });
  }
  void new_step() noexcept { ready_ = done_ = 0; }

  template <class E>
  void release(E& e) noexcept;

 private:
  template <int S>
  static constexpr int rank_of = layout_.stages.stage_rank[ctpipe::detail::ix(S)];
  static constexpr int device_at(int s) {
    return layout_.device[ctpipe::detail::ix(layout_.stages.stage_rank[ctpipe::detail::ix(s)])];
  }
  template <int S>
  static constexpr int device_of = device_at(S);
  static constexpr std::array<int, 2> held_stages = ctpipe::detail::mirrored_stages(chain_length, only < 0 ? 0 : only);

  // f(L) for each layer L of model stage J that holds parameters.
  template <int J, class F>
  static void each_layer(F&& f) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            constexpr std::size_t L = ctpipe::detail::ix(Stages.first[ctpipe::detail::ix(J)]) + K;
            if constexpr (has_parameters<typename Model::template layer_type<L>>)
              f(std::integral_constant<std::size_t, L>{});
          }(),
          ...);
    }
    (std::make_index_sequence<ctpipe::detail::ix(Stages.first[ctpipe::detail::ix(J) + 1] -
                                                 Stages.first[ctpipe::detail::ix(J)])>{});
  }
  template <int J, class E>
  void set_up_stage(E& e);
  template <int R, int J, class E>
  void sum_on_rank(E& e);
  template <int J, class E>
  void sum_in_process(E& e);

  // Model stage J's event of rank r at J x ranks + r, and its scratch on the device of its copy c
  // at 2J + c (where the two copies are on different devices); process mode: the stages whose copy
  // is final this step / already summed.
  std::array<typename Backend::event_type, slots * ctpipe::detail::ix(ranks)> events_{};
  std::array<bool, slots * ctpipe::detail::ix(ranks)> event_made_{};
  std::array<void*, 2 * slots> scratch_{};
  std::uint32_t ready_ = 0, done_ = 0;
};

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int J, class E>
inline void mirror_sums<Model, Stages, Backend, Layout, Transport>::set_up_stage(E& e) {
  for (const int r : {rank_of<J>, rank_of<chain_length + J>}) {
    const auto i = ctpipe::detail::ix(J * ranks + r);
    if (event_made_[i]) continue;
    E::check(Backend::event_create(&events_[i], layout_.device[ctpipe::detail::ix(r)]), "cudaEventCreateWithFlags",
             "construction: a mirrored stage's event (dualpipe)");
    event_made_[i] = true;
  }
  std::size_t most = 0;  // (the stage's largest layer)
  each_layer<J>([&](auto l) { most = std::max(most, e.model_.template layer<l>().gradients().size_bytes()); });
  if constexpr (device_of<J> != device_of<chain_length + J>)
    for (const int c : {0, 1})
      if (most > 0)
        E::check(Backend::malloc(&scratch_[ctpipe::detail::ix(2 * J + c)], most,
                                 c == 0 ? device_of<J> : device_of<chain_length + J>),
                 "cudaMalloc", "construction: a mirrored stage's sum buffer (dualpipe)");
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int R, class E>
inline void mirror_sums<Model, Stages, Backend, Layout, Transport>::after_tasks(E& e, std::uint32_t record,
                                                                                std::uint32_t sum) {
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (
        [&] {
          if (record >> J & 1u)
            E::check(Backend::record(events_[J * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(R)],
                                     e.streams_[ctpipe::detail::ix(R)]),
                     "cudaEventRecord", "a mirrored stage's gradients, final on a rank (dualpipe)");
          if constexpr (R == rank_of<static_cast<int>(J)> || R == rank_of<chain_length + static_cast<int>(J)>)
            if (sum >> J & 1u) sum_on_rank<R, static_cast<int>(J)>(e);
        }(),
        ...);
  }
  (std::make_index_sequence<ctpipe::detail::ix(chain_length)>{});
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int R, int J, class E>
inline void mirror_sums<Model, Stages, Backend, Layout, Transport>::sum_on_rank(E& e) {
  constexpr const char* what = "adding the gradients of a stage's two copies (dualpipe)";
  constexpr int other = R == rank_of<J> ? rank_of<chain_length + J> : rank_of<J>;
  constexpr int d = layout_.device[ctpipe::detail::ix(R)], far = layout_.device[ctpipe::detail::ix(other)];
  const auto s = e.streams_[ctpipe::detail::ix(R)];
  if constexpr (other != R)
    E::check(Backend::wait(s, events_[ctpipe::detail::ix(J * ranks + other)]), "cudaStreamWaitEvent", what);
  each_layer<J>([&](auto l) {
    auto a = e.model_.template layer<l>().gradients(), b = e.mirror_->template layer<l>().gradients();
    using T = std::remove_cvref_t<decltype(a[0])>;
    // `mine`: the copy on R's device, which takes the sum; `theirs`: the other.
    T* mine = R == rank_of<J> ? a.data() : b.data();
    T* theirs = R == rank_of<J> ? b.data() : a.data();
    const T* part = theirs;
    if constexpr (d != far) {
      T* scratch = static_cast<T*>(scratch_[ctpipe::detail::ix(2 * J + (R == rank_of<J> ? 0 : 1))]);
      E::check(Backend::memcpy_async(scratch, d, theirs, far, a.size_bytes(), s), "cudaMemcpyPeerAsync", what);
      part = scratch;
    }
    E::check(Backend::add(e.adders_[ctpipe::detail::ix(d)], mine, part, a.size(), s), "cuBLAS axpy", what);
    E::check(Backend::memcpy_async(theirs, far, mine, d, a.size_bytes(), s), "cudaMemcpyPeerAsync", what);
  });
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int J, class E>
inline void mirror_sums<Model, Stages, Backend, Layout, Transport>::sum_in_process(E& e) {
  e.transport_->group_after(0, e.streams_[ctpipe::detail::ix(only)]);
  each_layer<J>([&](auto l) {
    auto g = e.model_.template layer<l>().gradients();
    e.transport_->sum_pair(0, g.data(), g.size());
    if (e.transport_->sums_replicas()) e.transport_->sum(g.data(), g.size());
  });
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void mirror_sums<Model, Stages, Backend, Layout, Transport>::release(E&) noexcept {
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (event_made_[i]) (void)Backend::event_destroy(events_[i]);
  event_made_.fill(false);
  for (std::size_t i = 0; i < scratch_.size(); ++i)
    if (scratch_[i])
      (void)Backend::free(scratch_[i], device_at(static_cast<int>(i / 2) + (i % 2 == 0 ? 0 : chain_length)));
  scratch_.fill(nullptr);
}

}  // namespace ctpipe::cuda::detail
