// Shared parameters in the CUDA engine (ctpipe::shared_with): a part of the engine of its own
// (cuda/detail/engine.hpp holds one, empty where the model shares nothing), with its events,
// buffers and sums. It reaches the engine's streams, adders, transport and model through the
// engine it is given (a friend).
//
// One process (the CUDA executor): each group's sum runs on the stream of the rank whose last B or W
// of a member comes last in the issue order (cuda/detail/group_points.hpp), once every other
// holder's event is: the first member's gradient (or a copy of it on that rank's device) plus each
// other member's in layer order (a copy of it first where it is on another device), each an IEEE
// addition (Backend::add); then the sum into every member. sum_shared_gradients's order, so
// sequential_step's bits.
//
// Process mode (the NCCL executor, the MPI executor's device path): a group whose members are all
// on one rank is summed there, as above. One whose members are on several ranks: once this rank's
// members are final, the sums' stream gathers every holder's members (Transport::gather: each
// holder sends its members in layer order, as many slots as the holder with most), adds them in
// layer order and copies the sum into this rank's members: every holder adds the same parts in the
// same order, so all get the same bits. Groups that cross ranks are gathered in group order on
// every process (a collective that one process issued before another that a second process issued
// first could deadlock). With replicas, each member's layer is then summed across them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <ctpipe/config.hpp>        // CTPIPE_NTTP_TYPE
#include <ctpipe/detail/index.hpp>  // ix
#include <ctpipe/exec/detail/shared_sums.hpp>
#include <ctpipe/model/model.hpp>
#include <ctpipe/model/shared_parameters.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
class group_sums {
  using layout_type = CTPIPE_NTTP_TYPE(Layout);
  // (Read through a constant of its own, as the engine does: clang 14.)
  static constexpr auto layout_ = Layout;
  static constexpr int ranks = static_cast<int>(layout_type::ranks);
  static constexpr int device_count = static_cast<int>(layout_type::devices_used);
  static constexpr int only = Transport::rank;
  static constexpr std::size_t slots = has_shared_parameters_v<Model> ? shared_group_count<Model> : 0;

 public:
  static constexpr int rank_of_layer(int k) {
    return ctpipe::detail::rank_of_layer<Stages>(layout_.stages.stage_rank, k);
  }

  // One process, at construction: each group's events and scratch, and every member's copy
  // started equal to its group's first layer's (a copy on the origin stream, waited for).
  template <class E>
  void set_up(E& e);
  // One process: after a task of rank R (current device: R's), record the events of the groups in
  // `record`, and sum the groups in `sum` on R's stream.
  template <int R, class E>
  void after_tasks(E& e, std::uint32_t record, std::uint32_t sum);

  // Process mode, at construction: this rank's members started equal to their group's first layer
  // (copies on one rank, a gather of the parameters across ranks). Enqueued, not waited for (the
  // other processes may not have reached theirs): the first step waits for it (wait_for_start).
  template <class E>
  void set_up_processes(E& e);
  template <class E>
  void wait_for_start(E& e);
  // Process mode: this rank's members of group G are final on its stream. Sums each group that can
  // go now, in group order (a transport whose groups_at_end holds: none, until sum_ready).
  template <std::size_t G, class E>
  void final(E& e) {
    ready_ |= std::uint32_t{1} << G;
    if constexpr (!Transport::groups_at_end) sum_ready(e);
  }
  template <class E>
  void sum_ready(E& e);
  void new_step() noexcept { ready_ = done_ = 0; }

  template <class E>
  void release(E& e) noexcept;

 private:
  static constexpr int device_of_layer(int k) { return layout_.device[ctpipe::detail::ix(rank_of_layer(k))]; }
  template <std::size_t G>
  static constexpr bool holds(int r) {
    return ctpipe::detail::holds_member<Model, G, Stages>(layout_.stages.stage_rank, r);
  }
  // Whether a sum of group G on device d needs a scratch of the group's length there: to hold the
  // sum (its first member is elsewhere) and to bring another device's member in.
  template <std::size_t G>
  static constexpr int scratch_parts(int d) {
    int away = 0;
    for (const int k : ctpipe::detail::group_members<Model, G>) away += device_of_layer(k) != d ? 1 : 0;
    const bool first_away = device_of_layer(ctpipe::detail::group_members<Model, G>[0]) != d;
    return (first_away ? 1 : 0) + (away > (first_away ? 1 : 0) ? 1 : 0);
  }
  static constexpr auto holders = ctpipe::detail::group_holders<Model, Stages>(layout_.stages.stage_rank, ranks);
  template <std::size_t G>
  static constexpr int members_on(int r) {
    int c = 0;
    for (const int k : ctpipe::detail::group_members<Model, G>) c += rank_of_layer(k) == r ? 1 : 0;
    return c;
  }
  template <std::size_t G>
  static constexpr int most_members() {
    int m = 0;
    for (int r = 0; r < ranks; ++r) m = members_on<G>(r) > m ? members_on<G>(r) : m;
    return m;
  }
  // Member k's slot among the gathered ones: its rank's place among the holders, then its place
  // among that rank's members.
  template <std::size_t G>
  static constexpr int slot_of(int k) {
    const int r = rank_of_layer(k);
    int h = 0, j = 0;
    for (int q = 0; q < r; ++q) h += holds<G>(q) ? 1 : 0;
    for (const int m : ctpipe::detail::group_members<Model, G>) {
      if (m == k) break;
      j += rank_of_layer(m) == r ? 1 : 0;
    }
    return h * most_members<G>() + j;
  }

  // Group G's sum on rank R's stream (one process, or a group on one rank in process mode).
  template <int R, std::size_t G, class E>
  void sum_on_rank(E& e);
  // On the sums' stream: this rank's members of G (spans `x`, parameters or gradients) packed in
  // layer order, then every holder's gathered.
  template <std::size_t G, class Spans, class E>
  void gather(E& e, const Spans& x, bool construction);
  template <std::size_t G, class E>
  void sum_across_ranks(E& e);
  // With replicas: each of this rank's members of G, its whole layer summed across them.
  template <std::size_t G, class E>
  void sum_members_across_replicas(E& e);
  template <std::size_t G, class E>
  void sum_in_process(E& e);

  // Group G's event of rank r at G x ranks + r, and its scratch on device d at G x devices + d
  // (where a sum there needs one); process mode: each group's gather buffers (what this rank
  // sends, what every holder sent), and the groups whose members are final this step / already
  // summed.
  std::array<typename Backend::event_type, slots * ctpipe::detail::ix(ranks)> events_{};
  std::array<bool, slots * ctpipe::detail::ix(ranks)> event_made_{};
  std::array<void*, slots * ctpipe::detail::ix(device_count)> scratch_{};
  std::array<void*, only >= 0 ? slots : 0> buffers_{};
  std::uint32_t ready_ = 0, done_ = 0;
  typename Backend::event_type tied_{};  // the members' start, enqueued at construction
  bool tied_made_ = false, tie_pending_ = false;
};

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::set_up(E& e) {
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    using T = ctpipe::detail::group_element_t<Model, G>;
    constexpr auto members = ctpipe::detail::group_members<Model, G>;
    const auto p = ctpipe::detail::group_spans<false, Model, G>(e.model_);
    for (int r = 0; r < ranks; ++r)
      if (holds<G>(r)) {
        const auto i = G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(r);
        E::check(Backend::event_create(&events_[i], layout_.device[ctpipe::detail::ix(r)]), "cudaEventCreateWithFlags",
                 "construction: a shared group's event");
        event_made_[i] = true;
      }
    for (int d = 0; d < device_count; ++d) {
      bool used = false;
      for (int r = 0; r < ranks; ++r) used = used || (holds<G>(r) && layout_.device[ctpipe::detail::ix(r)] == d);
      if (const int parts = scratch_parts<G>(d); used && parts > 0 && !p[0].empty())
        E::check(Backend::malloc(&scratch_[G * ctpipe::detail::ix(device_count) + ctpipe::detail::ix(d)],
                                 ctpipe::detail::ix(parts) * p[0].size() * sizeof(T), d),
                 "cudaMalloc", "construction: a shared group's sum buffer");
    }
    for (std::size_t i = 1; i < members.size(); ++i)
      if (p[i].data() != p[0].data() && !p[0].empty())
        E::check(Backend::memcpy_async(p[i].data(), device_of_layer(members[i]), p[0].data(),
                                       device_of_layer(members[0]), p[0].size_bytes(), e.origin_),
                 "cudaMemcpyPeerAsync", "construction: copying a shared group's first parameters to its members");
  });
  E::check(Backend::synchronize(e.origin_), "cudaStreamSynchronize",
           "construction: copying a shared group's first parameters to its members");
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int R, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::after_tasks(E& e, std::uint32_t record,
                                                                               std::uint32_t sum) {
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    if (record >> G & 1u)
      E::check(Backend::record(events_[G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(R)],
                               e.streams_[ctpipe::detail::ix(R)]),
               "cudaEventRecord", "a shared group's gradients, final on a rank");
    if (sum >> G & 1u) sum_on_rank<R, G>(e);
  });
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <int R, std::size_t G, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::sum_on_rank(E& e) {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr int d = layout_.device[ctpipe::detail::ix(R)];
  constexpr const char* what = "summing a shared group's gradients";
  const auto s = e.streams_[ctpipe::detail::ix(R)];
  const auto g = ctpipe::detail::group_spans<true, Model, G>(e.model_);
  const std::size_t n = g[0].size(), bytes = g[0].size_bytes();
  if (n == 0) return;
  for (int r = 0; r < ranks; ++r)
    if (r != R && holds<G>(r))
      E::check(Backend::wait(s, events_[G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(r)]), "cudaStreamWaitEvent",
               what);
  T* scratch = static_cast<T*>(scratch_[G * ctpipe::detail::ix(device_count) + ctpipe::detail::ix(d)]);
  T* acc = g[0].data();
  if (device_of_layer(members[0]) != d) {
    acc = scratch;
    scratch += n;
    E::check(Backend::memcpy_async(acc, e.on(d), g[0].data(), e.on(device_of_layer(members[0])), bytes, s),
             "cudaMemcpyPeerAsync", what);
  }
  for (std::size_t i = 1; i < members.size(); ++i) {
    const T* part = g[i].data();
    if (device_of_layer(members[i]) != d) {
      E::check(Backend::memcpy_async(scratch, e.on(d), part, e.on(device_of_layer(members[i])), bytes, s),
               "cudaMemcpyPeerAsync", what);
      part = scratch;
    }
    E::check(Backend::add(e.adders_[ctpipe::detail::ix(d)], acc, part, n, s), "cuBLAS axpy", what);
  }
  for (std::size_t i = 0; i < members.size(); ++i)
    if (g[i].data() != acc)
      E::check(Backend::memcpy_async(g[i].data(), e.on(device_of_layer(members[i])), acc, e.on(d), bytes, s),
               "cudaMemcpyPeerAsync", what);
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::set_up_processes(E& e) {
  constexpr const char* what = "construction: starting a shared group's members equal";
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    if constexpr (holds<G>(only)) {
      using T = ctpipe::detail::group_element_t<Model, G>;
      constexpr auto members = ctpipe::detail::group_members<Model, G>;
      const auto p = ctpipe::detail::group_spans<false, Model, G>(e.model_);
      const std::size_t n = p[0].size(), bytes = p[0].size_bytes();
      if constexpr (holders[G] == 1) {
        for (std::size_t i = 1; i < members.size(); ++i)
          if (n > 0 && p[i].data() != p[0].data())
            E::check(Backend::memcpy_async(p[i].data(), e.on(0), p[0].data(), e.on(0), bytes, e.origin_),
                     "cudaMemcpyAsync", what);
      } else {
        constexpr auto most = ctpipe::detail::ix(most_members<G>());
        void* b = nullptr;
        E::check(Backend::malloc(&b, (most + most * ctpipe::detail::ix(holders[G])) * (n > 0 ? bytes : 1), e.on(0)),
                 "cudaMalloc", "construction: a shared group's gather buffers");
        buffers_[G] = b;
        e.transport_->group_after(static_cast<int>(G), e.origin_);
        gather<G>(e, p, true);
        const T* first = static_cast<const T*>(b) + (most + ctpipe::detail::ix(slot_of<G>(members[0]))) * n;
        const auto t = e.transport_->sums_stream();
        for (std::size_t i = 1; i < members.size(); ++i)
          if (rank_of_layer(members[i]) == only && n > 0)
            E::check(Backend::memcpy_async(p[i].data(), e.on(0), first, e.on(0), bytes, t), "cudaMemcpyAsync", what);
      }
    }
  });
  if (e.transport_->sums_stream()) {
    E::check(Backend::event_create(&tied_, e.on(0)), "cudaEventCreateWithFlags", what);
    tied_made_ = true;
    E::check(Backend::record(tied_, e.transport_->sums_stream()), "cudaEventRecord", what);
    tie_pending_ = true;
  }
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::wait_for_start(E& e) {
  if (tie_pending_) {  // (the first step: after the members' start, which construction enqueued)
    E::check(Backend::wait(e.origin_, tied_), "cudaStreamWaitEvent", "starting a shared group's members equal");
    tie_pending_ = false;
  }
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <std::size_t G, class Spans, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::gather(E& e, const Spans& x, bool construction) {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr auto most = ctpipe::detail::ix(most_members<G>());
  const char* what =
      construction ? "construction: starting a shared group's members equal" : "summing a shared group's gradients";
  const std::size_t n = x[0].size(), bytes = x[0].size_bytes();
  T* send = static_cast<T*>(buffers_[G]);
  const auto t = e.transport_->sums_stream();
  std::size_t j = 0;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (rank_of_layer(members[i]) == only && n > 0)
      E::check(Backend::memcpy_async(send + n * j++, e.on(0), x[i].data(), e.on(0), bytes, t), "cudaMemcpyAsync", what);
  e.transport_->gather(static_cast<int>(G), send, send + most * n, most * bytes);
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <std::size_t G, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::sum_across_ranks(E& e) {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr auto most = ctpipe::detail::ix(most_members<G>());
  constexpr const char* what = "summing a shared group's gradients";
  const auto g = ctpipe::detail::group_spans<true, Model, G>(e.model_);
  const std::size_t n = g[0].size(), bytes = g[0].size_bytes();
  e.transport_->group_after(static_cast<int>(G), e.streams_[ctpipe::detail::ix(only)]);
  gather<G>(e, g, false);
  if (n == 0) return;
  const auto t = e.transport_->sums_stream();
  T* parts = static_cast<T*>(buffers_[G]) + most * n;
  T* acc = parts + ctpipe::detail::ix(slot_of<G>(members[0])) * n;
  for (std::size_t i = 1; i < members.size(); ++i)
    E::check(Backend::add(e.adders_[ctpipe::detail::ix(layout_.device[ctpipe::detail::ix(only)])], acc,
                          parts + ctpipe::detail::ix(slot_of<G>(members[i])) * n, n, t),
             "cuBLAS axpy", what);
  for (std::size_t i = 0; i < members.size(); ++i)
    if (rank_of_layer(members[i]) == only)
      E::check(Backend::memcpy_async(g[i].data(), e.on(0), acc, e.on(0), bytes, t), "cudaMemcpyAsync", what);
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <std::size_t G, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::sum_members_across_replicas(E& e) {
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          if constexpr (rank_of_layer(members[I]) == only) {
            auto g = e.model_.template layer<ctpipe::detail::ix(members[I])>().gradients();
            e.transport_->sum(g.data(), g.size());
          }
        }(),
        ...);
  }
  (std::make_index_sequence<members.size()>{});
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <std::size_t G, class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::sum_in_process(E& e) {
  if constexpr (holders[G] == 1) {
    sum_on_rank<only, G>(e);
    if (e.transport_->sums_replicas())
      e.transport_->group_after(static_cast<int>(G), e.streams_[ctpipe::detail::ix(only)]);
  } else {
    sum_across_ranks<G>(e);
  }
  if (e.transport_->sums_replicas()) sum_members_across_replicas<G>(e);
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::sum_ready(E& e) {
  bool blocked = false;
  ctpipe::detail::for_each_group<Model>([&]<std::size_t H>() {
    if constexpr (holds<H>(only)) {
      const bool ready = (ready_ >> H & 1u) != 0, done = (done_ >> H & 1u) != 0;
      if (done) return;
      if constexpr (holders[H] > 1) {
        if (!ready || blocked) {
          blocked = true;
          return;
        }
      } else if (!ready) {
        return;
      }
      sum_in_process<H>(e);
      done_ |= std::uint32_t{1} << H;
    }
  });
}

template <model_type Model, auto Stages, class Backend, auto Layout, class Transport>
template <class E>
inline void group_sums<Model, Stages, Backend, Layout, Transport>::release(E& e) noexcept {
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (event_made_[i]) (void)Backend::event_destroy(events_[i]);
  event_made_.fill(false);
  if (tied_made_) (void)Backend::event_destroy(tied_);
  tied_made_ = tie_pending_ = false;
  for (void*& b : buffers_)
    if (b) (void)Backend::free(b, e.on(0));
  buffers_.fill(nullptr);
  for (std::size_t d = 0; d < scratch_.size(); ++d)
    if (scratch_[d]) (void)Backend::free(scratch_[d], e.on(static_cast<int>(d % ctpipe::detail::ix(device_count))));
  scratch_.fill(nullptr);
}

}  // namespace ctpipe::cuda::detail
