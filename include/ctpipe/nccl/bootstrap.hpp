// The job's communicator for the NCCL executor: every process joins it with the same ncclUniqueId,
// which process 0 makes and the others learn, over MPI (ctpipe/nccl/mpi_bootstrap.hpp) or through
// a file on a file system every process sees (here: for launchers without MPI).
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <ctpipe/nccl/errors.hpp>
#include <ctpipe/nccl/executor.hpp>  // job
#include <ctpipe/nccl/runtime.hpp>

namespace ctpipe::nccl {

/// A communicator of every process of the job, destroyed with the object (after the executors
/// that use it).
class world {
 public:
  /// Collective: every process calls it with the same `id`, its number and the count, on `device`.
  world(const ncclUniqueId& id, int process, int processes, int device) : job_{nullptr, process, processes, device} {
    if (process < 0 || process >= processes)
      throw launch_error("ctpipe::nccl::world: process " + std::to_string(process) + " of " +
                         std::to_string(processes));
    if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
      throw launch_error("ctpipe::nccl::world: process " + std::to_string(process) + ": cudaSetDevice(" +
                         std::to_string(device) + ") failed: " + cudaGetErrorString(e));
    if (const ncclResult_t r = ncclCommInitRank(&job_.world, processes, id, process); r != ncclSuccess)
      throw error("ncclCommInitRank", ncclGetErrorString(r), "joining the job's communicator");
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world() {
    if (job_.world) (void)ncclCommDestroy(job_.world);
  }
  /// What the executor takes.
  const job<runtime>& get() const noexcept { return job_; }

 private:
  job<runtime> job_;
};

/// Process 0 makes the id and writes it to `path` (whole, by a rename); every other process waits
/// for the file, up to `timeout`, and reads it. The file is left for the user to remove (a stale one
/// from an earlier job would be read: use a fresh path per job).
inline ncclUniqueId unique_id_through_file(const std::string& path, int process,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(600)) {
  ncclUniqueId id{};
  if (process == 0) {
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      throw error("ncclGetUniqueId", ncclGetErrorString(r), "making the job's id");
    const std::string tmp = path + ".part";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof id.internal);
      if (!out) throw launch_error("ctpipe::nccl: cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id.internal, sizeof id.internal)) return id;
    if (std::chrono::steady_clock::now() > deadline)
      throw launch_error("ctpipe::nccl: process " + std::to_string(process) + " waited " +
                         std::to_string(timeout.count()) + " ms for process 0 to write " + path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ctpipe::nccl
