// NCCL as the NCCL executor's Net backend (nccl/detail/transport.hpp): every function returns the
// ncclResult_t of the call it makes; the executor checks each one and names the call and what it
// was for in its error.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>  // cudaStream_t
#include <nccl.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "ctpipe::nccl needs NCCL 2.18 or later (ncclCommSplit)"
#endif

namespace ctpipe::nccl {

struct runtime {
  using status = ncclResult_t;
  using comm_type = ncclComm_t;
  static constexpr int no_colour = NCCL_SPLIT_NOCOLOR;

  static bool ok(status s) noexcept { return s == ncclSuccess; }
  static std::string describe(status s) { return ncclGetErrorString(s); }

  // Collective over `parent`: the processes of one colour get a communicator, ranked by key.
  static status split(comm_type parent, int colour, int key, comm_type* out) {
    return ncclCommSplit(parent, colour, key, out, nullptr);
  }
  // Bytes, so that any trivially copyable tensor crosses as it is.
  static status send(const void* buffer, std::size_t bytes, int peer, comm_type c, cudaStream_t s) {
    return ncclSend(buffer, bytes, ncclUint8, peer, c, s);
  }
  static status recv(void* buffer, std::size_t bytes, int peer, comm_type c, cudaStream_t s) {
    return ncclRecv(buffer, bytes, ncclUint8, peer, c, s);
  }
  static status all_reduce_sum(double* buffer, std::size_t count, comm_type c, cudaStream_t s) {
    return ncclAllReduce(buffer, buffer, count, ncclFloat64, ncclSum, c, s);
  }
  static status all_reduce_sum(float* buffer, std::size_t count, comm_type c, cudaStream_t s) {
    return ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, c, s);
  }
  // `bytes` at `buffer` on rank `root` into `buffer` on every other rank (in place).
  static status broadcast(void* buffer, std::size_t bytes, int root, comm_type c, cudaStream_t s) {
    return ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, c, s);
  }
  // Every rank's `bytes` from `send`, into `recv` in rank order (bytes x the communicator's size).
  static status all_gather(const void* send, void* recv, std::size_t bytes, comm_type c, cudaStream_t s) {
    return ncclAllGather(send, recv, bytes, ncclUint8, c, s);
  }
  // A communicator that may be waiting forever on a dead peer: ends its operations and frees it.
  static status abort(comm_type c) { return ncclCommAbort(c); }
  static status destroy(comm_type c) { return ncclCommDestroy(c); }
};

}  // namespace ctpipe::nccl
