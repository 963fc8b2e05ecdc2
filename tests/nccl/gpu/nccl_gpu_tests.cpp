// The NCCL executor and the MPI executor's device path on real GPUs, one process per rank (mpirun
// -np P, P = 1 or 2; exit 77, skipped, where there is no GPU or fewer GPUs than processes: NCCL
// refuses two ranks of one communicator on one device). The NCCL check is check.hpp's; the MPI
// executor's device path (pinned-host staging, eager) must give the same bits.
#include <mpi.h>

#include "check.hpp"

#include <ctpipe/mpi/device.hpp>
#include <ctpipe/nccl/mpi_bootstrap.hpp>

namespace {

using namespace nccl_gpu;

// The MPI executor's device path over the same data: equal to the reference, bit for bit.
constexpr auto mpi_device_path = []<auto Table, auto Stages>(const ctpipe::nccl::world& w, const data& d, int steps,
                                                             const std::vector<double>& want, net& ref) {
  net m;
  init(m);
  loss l;
  ctpipe::mpi::device_executor<Table, net, Stages, loss> exec(m, l, w.get().device);
  mlp_gpu::blas_handles::get().bind(exec.stream(), w.get().device);
  if (exec.second_stream() != exec.stream()) mlp_gpu::blas_handles::get().bind(exec.second_stream(), w.get().device);
  std::vector<double> got;
  for (int i = 0; i < steps; ++i) {
    const auto losses = exec.step(d.inputs, d.targets);
    got.assign(losses.begin(), losses.end());
  }
  bool equal =
      got == want && rank_gradients<Stages, Table>(m, exec.rank()) == rank_gradients<Stages, Table>(ref, exec.rank());
  std::printf("process %d, %s, mpi device path, %d steps: %s\n", w.get().process, Table.params.name.text, steps,
              equal ? "equal" : "DIFFER");
  // Forward only (nothing updates the parameters here, and the model has no dropout): the losses of
  // the steps, to the bit, and the gradients left as they were.
  const std::vector<float> gradients = rank_gradients<Stages, Table>(m, exec.rank());
  const auto evaluated = exec.evaluate(d.inputs, d.targets);
  const bool same = std::vector<double>(evaluated.begin(), evaluated.end()) == want &&
                    rank_gradients<Stages, Table>(m, exec.rank()) == gradients;
  std::printf("process %d, %s, mpi device path, evaluate: %s\n", w.get().process, Table.params.name.text,
              same ? "equal" : "DIFFER");
  return equal && same;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int processes = 0, devices = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < processes || processes > 2) {
    std::printf("nccl gpu tests: %d device(s) for %d process(es): skipped (one device per process, P <= 2)\n", devices,
                processes);
    MPI_Finalize();
    return 77;
  }
  int bad = 0;
  {
    const ctpipe::nccl::world w = ctpipe::nccl::world_over_mpi();
    bad = processes == 1 ? all<1>(w, mpi_device_path) : all<2>(w, mpi_device_path);
  }
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
