// The NCCL executor on one GPU, one process, no MPI: check.hpp's check at P = 1, the job's
// communicator joined through nccl::unique_id_through_file (a launcher without MPI's bootstrap).
// For a machine without mpirun; exit 77, skipped, where there is no GPU.
#include <unistd.h>

#include <filesystem>

#include "check.hpp"  // and ctpipe/nccl/bootstrap.hpp

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
    std::printf("nccl gpu solo: no CUDA device: skipped\n");
    return 77;
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ctpipe_nccl_solo_" + std::to_string(getpid()))).string();
  const ncclUniqueId id = ctpipe::nccl::unique_id_through_file(path, 0);
  std::filesystem::remove(path);
  const ctpipe::nccl::world w(id, 0, 1, 0);
  constexpr auto nothing_more = []<auto, auto>(const ctpipe::nccl::world&, const nccl_gpu::data&, int,
                                               const std::vector<double>&, nccl_gpu::net&) {
    return true;
  };
  return nccl_gpu::all<1>(w, nothing_more);
}
