// The MPI engine's messages (mpi/detail/engine.hpp): the step's receives posted ahead into its
// rings, a receive waited for (and unpacked, with extents), a send (in place, or from its ring
// slot), the sends waited for at the step's end, and every request dropped after a failed step.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include <ctpipe/mpi/detail/engine.hpp>

namespace ctpipe::mpi::detail {

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
inline void engine<Model, Stages, Loss, Layout, R>::post_ahead() {
  [&]<std::size_t... B>(std::index_sequence<B...>) {
    (
        [&] {
          if constexpr (crosses_here<B, false>()) {  // activations in
            constexpr route m = ctpipe::detail::route_of(op_kind::recv_forward, static_cast<int>(B) + 1, 0);
            restart<m>();
          }
          if constexpr (crosses_here<B, true>()) {  // gradients in
            constexpr route m = ctpipe::detail::route_of(op_kind::recv_backward, static_cast<int>(B), 0);
            restart<m>();
          }
        }(),
        ...);
  }
  (std::make_index_sequence<base::boundaries>{});
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          constexpr skip_route k = Layout.skips[K];
          if constexpr (skip_here<K, false>) {  // values in
            constexpr route m = ctpipe::detail::route_of(op_kind::recv_skip_forward, k.to, k.from);
            restart<m>();
          }
          if constexpr (skip_here<K, true>) {  // gradients in
            constexpr route m = ctpipe::detail::route_of(op_kind::recv_skip_backward, k.from, k.to);
            restart<m>();
          }
        }(),
        ...);
  }
  (std::make_index_sequence<base::crossing_count>{});
}

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
template <ctpipe::detail::route M>
inline void engine<Model, Stages, Loss, Layout, R>::post_through(int last) {
  auto& r = ring_of<M, true>();
  using Ring = std::remove_cvref_t<decltype(r)>;
  constexpr int bytes = static_cast<int>(packed ? ctpipe::detail::packed_capacity<typename Ring::value_type>
                                                : sizeof(typename Ring::value_type));
  const place& w = s_.where();
  for (const int end = std::min(last + 1, messages_of<M>); r.posted < end; ++r.posted) {
    const auto k = ctpipe::detail::ix(r.posted % capacity_of<M>);
    void* into = packed ? static_cast<void*>(&r.wire[k]) : static_cast<void*>(&r.slot[k]);
    check(MPI_Irecv(into, bytes, MPI_BYTE, process_of(base::template rank_of<M.far>, w.replica, w.replicas), tag_of<M>,
                    s_.data(), &r.request[k]),
          "MPI_Irecv");
  }
}

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
template <op_kind Op, int S, ctpipe::detail::route M, class Args>
inline void engine<Model, Stages, Loss, Layout, R>::receive_on(const Args& a, ctpipe::detail::lazy_text what) {
  auto& r = ring_of<M, true>();
  constexpr int From = base::template rank_of<M.far>;
  const auto k = ctpipe::detail::ix(a.message % capacity_of<M>);
  post_through<M>(a.message);
  s_.record().wait(ctpipe::detail::hang_state::receiving, process_of(From, s_.where().replica, s_.where().replicas));
  MPI_Status status{};
  s_.wait<true>(r.request[k], peer_text{"waiting for ", what, From}, &status);
  if constexpr (packed) {
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (!ctpipe::detail::unpack(r.wire[k].bytes, static_cast<std::size_t>(got), r.slot[k], base::token_capacity))
      this->template guarded<R, Op, S>(a, [&] {
        throw mpi_error(std::string(name) + ": received " + what() + " from rank " + std::to_string(From) + " as " +
                        std::to_string(got) +
                        " bytes that are no such message (its extent out of range, or its length not the "
                        "extent's); were both processes built from the same model?");
      });
    post_through<M>(a.message + capacity_of<M>);
  }
}

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
template <int Capacity, int Tag, int To, bool InPlace, class Ring, class Args>
inline void engine<Model, Stages, Loss, Layout, R>::send_on(Ring& r, const Args& a,
                                                            const typename Ring::value_type& value, int extent,
                                                            ctpipe::detail::lazy_text what) {
  using M = typename Ring::value_type;
  // (In place: the request of the stash slot an activation leaves from, waited for by the F that
  // takes it; a gradient's one request, waited for by the stage's next B or I.)
  const auto k = ctpipe::detail::ix(InPlace ? (r.request.size() == 1 ? 0 : a.stash) : a.message % Capacity);
  const place& w = s_.where();
  const int to = process_of(To, w.replica, w.replicas);
  if (r.request[k] != MPI_REQUEST_NULL) {
    s_.record().wait(ctpipe::detail::hang_state::sending, to);
    s_.wait<true>(r.request[k], peer_text{"sending ", what, To});
  }
  const void* from = nullptr;
  int bytes = 0;
  if constexpr (packed) {
    bytes = static_cast<int>(ctpipe::detail::pack(value, extent, r.wire[k].bytes));
    from = &r.wire[k];
    sent_ += ctpipe::detail::message_used_bytes<M>(extent);
  } else if constexpr (InPlace) {
    bytes = static_cast<int>(sizeof(M));
    from = &value;
    sent_ += sizeof(M);
  } else {
    r.slot[k] = value;
    bytes = static_cast<int>(sizeof(M));
    from = &r.slot[k];
    sent_ += sizeof(M);
  }
  if (s_.synchronous_sends())
    check(MPI_Issend(from, bytes, MPI_BYTE, to, Tag, s_.data(), &r.request[k]), "MPI_Issend");
  else
    check(MPI_Isend(from, bytes, MPI_BYTE, to, Tag, s_.data(), &r.request[k]), "MPI_Isend");
}

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
template <std::size_t... B>
inline void engine<Model, Stages, Loss, Layout, R>::wait_sends(std::index_sequence<B...>) {
  [[maybe_unused]] auto one = [&](auto& r) {
    for (MPI_Request& q : r.request) s_.wait<false>(q, [] { return std::string("waiting for a send to complete"); });
  };
  (one(std::get<B>(out_forward_)), ...);
  (one(std::get<B>(out_backward_)), ...);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (one(std::get<K>(out_skip_forward_)), ...);
    (one(std::get<K>(out_skip_backward_)), ...);
  }
  (std::make_index_sequence<base::crossing_count>{});
}

template <model_type Model, auto Stages, class Loss, auto Layout, int R>
template <std::size_t... B>
inline void engine<Model, Stages, Loss, Layout, R>::drop_requests(std::index_sequence<B...>) {
  [[maybe_unused]] auto cancel = [](auto& r) {
    for (MPI_Request& q : r.request)
      if (q != MPI_REQUEST_NULL) {
        MPI_Cancel(&q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
      }
  };
  [[maybe_unused]] auto release = [](auto& r) {
    for (MPI_Request& q : r.request)
      if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
  };
  (cancel(std::get<B>(in_forward_)), ...);
  (cancel(std::get<B>(in_backward_)), ...);
  (release(std::get<B>(out_forward_)), ...);
  (release(std::get<B>(out_backward_)), ...);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (cancel(std::get<K>(in_skip_forward_)), ...);
    (cancel(std::get<K>(in_skip_backward_)), ...);
    (release(std::get<K>(out_skip_forward_)), ...);
    (release(std::get<K>(out_skip_backward_)), ...);
  }
  (std::make_index_sequence<base::crossing_count>{});
  reductions_.fill(MPI_REQUEST_NULL);
  for (shared_group& sg : shared_) sg.request = MPI_REQUEST_NULL;
  mirror_requests_.fill(MPI_REQUEST_NULL);
  mirrors_ready_ = mirrors_started_ = 0;
}

}  // namespace ctpipe::mpi::detail
