// The MPI executor's messages in flight (mpi/detail/engine.hpp): a ring of them for each crossing
// and direction, with the request of each; and the MPI datatype of a gradient's elements.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <type_traits>

#include <ctpipe/detail/index.hpp>         // ix
#include <ctpipe/exec/detail/extents.hpp>  // carried, packed_capacity

namespace ctpipe::mpi::detail {

template <class T>
MPI_Datatype datatype_of() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else
    static_assert(std::is_same_v<T, float>,
                  "ctpipe::mpi::executor: data parallelism sums gradients of float or double (a layer's gradients() "
                  "holds another type)");
}

// N messages M in flight on one boundary, one direction, and the request of each (a receive is
// posted ahead, as soon as its slot is free: mpi/detail/engine.hpp). In a model of
// fixed shapes a message is sent and received in its slot. In one with extents (Packed) it travels
// packed (exec/detail/extents.hpp) in a wire buffer: a receiving ring unpacks it into its slot (a
// carried message), a sending ring packs it there and has no slots. A sending ring InPlace sends
// from where the tensor lies (a stage's stash slot: N, one request per stash slot) and has no slots.
template <class M, int N, bool Packed = false, bool Receives = true, bool InPlace = false>
struct ring {
  using value_type = M;
  using slot_type = std::conditional_t<Packed, ctpipe::detail::carried<M>, M>;
  struct alignas(8) wire_type {
    std::byte bytes[ctpipe::detail::packed_capacity<M>];
  };
  std::array<slot_type, (Receives || !Packed) && !InPlace ? ctpipe::detail::ix(N) : 0> slot{};
  std::array<wire_type, Packed ? ctpipe::detail::ix(N) : 0> wire{};
  std::array<MPI_Request, ctpipe::detail::ix(N)> request{};
  int posted = 0;  // a receiving ring: the step's messages whose receives are posted (the first `posted`)
  ring() { request.fill(MPI_REQUEST_NULL); }
};

}  // namespace ctpipe::mpi::detail
