// The NCCL executor's job over MPI (link ctpipe::nccl and ctpipe::mpi): process 0 of `comm` makes
// the ncclUniqueId and broadcasts it; each process takes the device of its place on its machine
// (its rank among the processes that share its memory, modulo the devices it sees).
#pragma once

#include <mpi.h>

#include <string>

#include <cuda_runtime_api.h>

#include <ctpipe/nccl/bootstrap.hpp>

namespace ctpipe::nccl {

/// The device for this process: its rank among the processes of `comm` on its machine, modulo the
/// devices visible.
inline int local_device(MPI_Comm comm = MPI_COMM_WORLD) {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int r = 0;
  MPI_Comm_rank(local, &r);
  MPI_Comm_free(&local);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw launch_error("ctpipe::nccl: no CUDA device is visible");
  return r % n;
}

/// Collective over `comm`: the job's communicator, every process of `comm` in it, in `comm`'s order.
inline world world_over_mpi(MPI_Comm comm = MPI_COMM_WORLD, int device = -1) {
  int process = 0, processes = 0;
  MPI_Comm_rank(comm, &process);
  MPI_Comm_size(comm, &processes);
  if (device < 0) device = local_device(comm);
  ncclUniqueId id{};
  if (process == 0)
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw error("ncclGetUniqueId", ncclGetErrorString(r), "making the job's id");
  MPI_Bcast(id.internal, sizeof id.internal, MPI_BYTE, 0, comm);
  return world(id, process, processes, device);
}

}  // namespace ctpipe::nccl
