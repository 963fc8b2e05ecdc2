// The CUDA engine's gradient sums within a step (cuda/detail/engine.hpp declares them): a shared
// group's members summed in layer order where the group's last member is final (one process: the
// CUDA executor; process mode: over the group's communicator), and a bidirectional table's two
// copies of each stage summed, the first chain's term first (exec/detail/shared_sums.hpp and
// cuda/detail/group_points.hpp say when).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include <ctpipe/cuda/detail/engine.hpp>

namespace ctpipe::cuda::detail {

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::set_up_groups() {
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    using T = ctpipe::detail::group_element_t<Model, G>;
    constexpr auto members = ctpipe::detail::group_members<Model, G>;
    const auto p = ctpipe::detail::group_spans<false, Model, G>(model_);
    for (int r = 0; r < ranks; ++r)
      if (holds<G>(r)) {
        const auto e = G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(r);
        check(Backend::event_create(&group_events_[e], layout_.device[ctpipe::detail::ix(r)]),
              "cudaEventCreateWithFlags", "construction: a shared group's event");
        group_event_made_[e] = true;
      }
    for (int d = 0; d < device_count; ++d) {
      bool used = false;
      for (int r = 0; r < ranks; ++r) used = used || (holds<G>(r) && layout_.device[ctpipe::detail::ix(r)] == d);
      if (const int parts = scratch_parts<G>(d); used && parts > 0 && !p[0].empty())
        check(Backend::malloc(&group_scratch_[G * ctpipe::detail::ix(device_count) + ctpipe::detail::ix(d)],
                              ctpipe::detail::ix(parts) * p[0].size() * sizeof(T), d),
              "cudaMalloc", "construction: a shared group's sum buffer");
    }
    for (std::size_t i = 1; i < members.size(); ++i)
      if (p[i].data() != p[0].data() && !p[0].empty())
        check(Backend::memcpy_async(p[i].data(), device_of_layer(members[i]), p[0].data(), device_of_layer(members[0]),
                                    p[0].size_bytes(), origin_),
              "cudaMemcpyPeerAsync", "construction: copying a shared group's first parameters to its members");
  });
  check(Backend::synchronize(origin_), "cudaStreamSynchronize",
        "construction: copying a shared group's first parameters to its members");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::after_group_tasks(std::uint32_t record,
                                                                                       std::uint32_t sum) {
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    if (record >> G & 1u)
      check(Backend::record(group_events_[G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(R)],
                            streams_[ctpipe::detail::ix(R)]),
            "cudaEventRecord", "a shared group's gradients, final on a rank");
    if (sum >> G & 1u) sum_group<R, G>();
  });
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, std::size_t G>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_group() {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr int d = device_of_rank<R>;
  constexpr const char* what = "summing a shared group's gradients";
  const auto s = streams_[ctpipe::detail::ix(R)];
  const auto g = ctpipe::detail::group_spans<true, Model, G>(model_);
  const std::size_t n = g[0].size(), bytes = g[0].size_bytes();
  if (n == 0) return;
  for (int r = 0; r < ranks; ++r)
    if (r != R && holds<G>(r))
      check(Backend::wait(s, group_events_[G * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(r)]),
            "cudaStreamWaitEvent", what);
  T* scratch = static_cast<T*>(group_scratch_[G * ctpipe::detail::ix(device_count) + ctpipe::detail::ix(d)]);
  T* acc = g[0].data();
  if (device_of_layer(members[0]) != d) {
    acc = scratch;
    scratch += n;
    check(Backend::memcpy_async(acc, on(d), g[0].data(), on(device_of_layer(members[0])), bytes, s),
          "cudaMemcpyPeerAsync", what);
  }
  for (std::size_t i = 1; i < members.size(); ++i) {
    const T* part = g[i].data();
    if (device_of_layer(members[i]) != d) {
      check(Backend::memcpy_async(scratch, on(d), part, on(device_of_layer(members[i])), bytes, s),
            "cudaMemcpyPeerAsync", what);
      part = scratch;
    }
    check(Backend::add(adders_[ctpipe::detail::ix(d)], acc, part, n, s), "cuBLAS axpy", what);
  }
  for (std::size_t i = 0; i < members.size(); ++i)
    if (g[i].data() != acc)
      check(Backend::memcpy_async(g[i].data(), on(device_of_layer(members[i])), acc, on(d), bytes, s),
            "cudaMemcpyPeerAsync", what);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::set_up_process_groups() {
  constexpr const char* what = "construction: starting a shared group's members equal";
  ctpipe::detail::for_each_group<Model>([&]<std::size_t G>() {
    if constexpr (holds<G>(only)) {
      using T = ctpipe::detail::group_element_t<Model, G>;
      constexpr auto members = ctpipe::detail::group_members<Model, G>;
      const auto p = ctpipe::detail::group_spans<false, Model, G>(model_);
      const std::size_t n = p[0].size(), bytes = p[0].size_bytes();
      if constexpr (holder_count<G>() == 1) {
        for (std::size_t i = 1; i < members.size(); ++i)
          if (n > 0 && p[i].data() != p[0].data())
            check(Backend::memcpy_async(p[i].data(), on(0), p[0].data(), on(0), bytes, origin_), "cudaMemcpyAsync",
                  what);
      } else {
        constexpr auto most = ctpipe::detail::ix(most_members<G>());
        void* b = nullptr;
        check(Backend::malloc(&b, (most + most * ctpipe::detail::ix(holder_count<G>())) * (n > 0 ? bytes : 1), on(0)),
              "cudaMalloc", "construction: a shared group's gather buffers");
        group_buffers_[G] = b;
        transport_->group_after(static_cast<int>(G), origin_);
        gather_group<G>(p, true);
        const T* first = static_cast<const T*>(b) + (most + ctpipe::detail::ix(slot_of<G>(members[0]))) * n;
        const auto t = transport_->sums_stream();
        for (std::size_t i = 1; i < members.size(); ++i)
          if (rank_of_layer(members[i]) == only && n > 0)
            check(Backend::memcpy_async(p[i].data(), on(0), first, on(0), bytes, t), "cudaMemcpyAsync", what);
      }
    }
  });
  if (transport_->sums_stream()) {
    check(Backend::event_create(&tied_, on(0)), "cudaEventCreateWithFlags", what);
    tied_made_ = true;
    check(Backend::record(tied_, transport_->sums_stream()), "cudaEventRecord", what);
    tie_pending_ = true;
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t G, class Spans>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::gather_group(const Spans& x, bool construction) {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr auto most = ctpipe::detail::ix(most_members<G>());
  const char* what =
      construction ? "construction: starting a shared group's members equal" : "summing a shared group's gradients";
  const std::size_t n = x[0].size(), bytes = x[0].size_bytes();
  T* send = static_cast<T*>(group_buffers_[G]);
  const auto t = transport_->sums_stream();
  std::size_t j = 0;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (rank_of_layer(members[i]) == only && n > 0)
      check(Backend::memcpy_async(send + n * j++, on(0), x[i].data(), on(0), bytes, t), "cudaMemcpyAsync", what);
  transport_->gather(static_cast<int>(G), send, send + most * n, most * bytes);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t G>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_across_ranks() {
  using T = ctpipe::detail::group_element_t<Model, G>;
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  constexpr auto most = ctpipe::detail::ix(most_members<G>());
  constexpr const char* what = "summing a shared group's gradients";
  const auto g = ctpipe::detail::group_spans<true, Model, G>(model_);
  const std::size_t n = g[0].size(), bytes = g[0].size_bytes();
  transport_->group_after(static_cast<int>(G), streams_[ctpipe::detail::ix(only)]);
  gather_group<G>(g, false);
  if (n == 0) return;
  const auto t = transport_->sums_stream();
  T* parts = static_cast<T*>(group_buffers_[G]) + most * n;
  T* acc = parts + ctpipe::detail::ix(slot_of<G>(members[0])) * n;
  for (std::size_t i = 1; i < members.size(); ++i)
    check(Backend::add(adders_[ctpipe::detail::ix(device_of_rank<only>)], acc,
                       parts + ctpipe::detail::ix(slot_of<G>(members[i])) * n, n, t),
          "cuBLAS axpy", what);
  for (std::size_t i = 0; i < members.size(); ++i)
    if (rank_of_layer(members[i]) == only)
      check(Backend::memcpy_async(g[i].data(), on(0), acc, on(0), bytes, t), "cudaMemcpyAsync", what);
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t G>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_members_across_replicas() {
  constexpr auto members = ctpipe::detail::group_members<Model, G>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          if constexpr (rank_of_layer(members[I]) == only) {
            auto g = model_.template layer<ctpipe::detail::ix(members[I])>().gradients();
            transport_->sum(g.data(), g.size());
          }
        }(),
        ...);
  }
  (std::make_index_sequence<members.size()>{});
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t G>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_process_group() {
  if constexpr (holder_count<G>() == 1) {
    sum_group<only, G>();
    if (transport_->sums_replicas()) transport_->group_after(static_cast<int>(G), streams_[ctpipe::detail::ix(only)]);
  } else {
    sum_across_ranks<G>();
  }
  if (transport_->sums_replicas()) sum_members_across_replicas<G>();
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <std::size_t G>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::group_final() {
  if constexpr (Transport::tag::shared_parameters) {
    groups_ready_ |= std::uint32_t{1} << G;
    if constexpr (!Transport::groups_at_end) sum_ready_groups();
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_ready_groups() {
  bool blocked = false;
  ctpipe::detail::for_each_group<Model>([&]<std::size_t H>() {
    if constexpr (holds<H>(only)) {
      const bool ready = (groups_ready_ >> H & 1u) != 0, done = (groups_done_ >> H & 1u) != 0;
      if (done) return;
      if constexpr (holder_count<H>() > 1) {
        if (!ready || blocked) {
          blocked = true;
          return;
        }
      } else if (!ready) {
        return;
      }
      sum_process_group<H>();
      groups_done_ |= std::uint32_t{1} << H;
    }
  });
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int J, class F>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::each_mirrored_layer(F&& f) {
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          constexpr std::size_t L = ctpipe::detail::ix(first_layer<J>) + K;
          if constexpr (has_parameters<typename Model::template layer_type<L>>)
            f(std::integral_constant<std::size_t, L>{});
        }(),
        ...);
  }
  (std::make_index_sequence<ctpipe::detail::ix(layer_count<J>)>{});
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int J>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::set_up_mirror() {
  for (const int r : {rank_of<J>, rank_of<chain_length + J>}) {
    const auto e = ctpipe::detail::ix(J * ranks + r);
    if (mirror_event_made_[e]) continue;
    check(Backend::event_create(&mirror_events_[e], layout_.device[ctpipe::detail::ix(r)]), "cudaEventCreateWithFlags",
          "construction: a mirrored stage's event (dualpipe)");
    mirror_event_made_[e] = true;
  }
  std::size_t most = 0;  // (the stage's largest layer)
  each_mirrored_layer<J>([&](auto l) { most = std::max(most, model_.template layer<l>().gradients().size_bytes()); });
  if constexpr (device_of<J> != device_of<chain_length + J>)
    for (const int c : {0, 1})
      if (most > 0)
        check(Backend::malloc(&mirror_scratch_[ctpipe::detail::ix(2 * J + c)], most,
                              c == 0 ? device_of<J> : device_of<chain_length + J>),
              "cudaMalloc", "construction: a mirrored stage's sum buffer (dualpipe)");
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::after_mirror_tasks(std::uint32_t record,
                                                                                        std::uint32_t sum) {
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (
        [&] {
          if (record >> J & 1u)
            check(Backend::record(mirror_events_[J * ctpipe::detail::ix(ranks) + ctpipe::detail::ix(R)],
                                  streams_[ctpipe::detail::ix(R)]),
                  "cudaEventRecord", "a mirrored stage's gradients, final on a rank (dualpipe)");
          if constexpr (R == rank_of<static_cast<int>(J)> || R == rank_of<chain_length + static_cast<int>(J)>)
            if (sum >> J & 1u) sum_mirror<R, static_cast<int>(J)>();
        }(),
        ...);
  }
  (std::make_index_sequence<ctpipe::detail::ix(chain_length)>{});
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int R, int J>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_mirror() {
  constexpr const char* what = "adding the gradients of a stage's two copies (dualpipe)";
  constexpr int other = R == rank_of<J> ? rank_of<chain_length + J> : rank_of<J>;
  constexpr int d = device_of_rank<R>, far = device_of_rank<other>;
  const auto s = streams_[ctpipe::detail::ix(R)];
  if constexpr (other != R)
    check(Backend::wait(s, mirror_events_[ctpipe::detail::ix(J * ranks + other)]), "cudaStreamWaitEvent", what);
  each_mirrored_layer<J>([&](auto l) {
    auto a = model_.template layer<l>().gradients(), b = mirror_->template layer<l>().gradients();
    using T = std::remove_cvref_t<decltype(a[0])>;
    // `mine`: the copy on R's device, which takes the sum; `theirs`: the other.
    T* mine = R == rank_of<J> ? a.data() : b.data();
    T* theirs = R == rank_of<J> ? b.data() : a.data();
    const T* part = theirs;
    if constexpr (d != far) {
      T* scratch = static_cast<T*>(mirror_scratch_[ctpipe::detail::ix(2 * J + (R == rank_of<J> ? 0 : 1))]);
      check(Backend::memcpy_async(scratch, d, theirs, far, a.size_bytes(), s), "cudaMemcpyPeerAsync", what);
      part = scratch;
    }
    check(Backend::add(adders_[ctpipe::detail::ix(d)], mine, part, a.size(), s), "cuBLAS axpy", what);
    check(Backend::memcpy_async(theirs, far, mine, d, a.size_bytes(), s), "cudaMemcpyPeerAsync", what);
  });
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int S>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::mirror_final() {
  if constexpr (mirrored) {
    mirrors_ready_ |= 1u << chains_.model_stage(S);
    if constexpr (!Transport::groups_at_end) sum_ready_mirrors();
  }
}

template <model_type Model, auto Stages, class Loss, class Backend, auto Layout, class Transport>
template <int J>
inline void engine<Model, Stages, Loss, Backend, Layout, Transport>::sum_process_mirror() {
  transport_->group_after(0, streams_[ctpipe::detail::ix(only)]);
  each_mirrored_layer<J>([&](auto l) {
    auto g = model_.template layer<l>().gradients();
    transport_->sum_pair(0, g.data(), g.size());
    if (transport_->sums_replicas()) transport_->sum(g.data(), g.size());
  });
}

}  // namespace ctpipe::cuda::detail
