// A job that cannot finish its step, under mpirun, with the hang report on (CTPIPE_REPORT_DIR):
// run by expect_hang.sh, which checks that the job ends within its deadline, never hangs, and that
// `ctpipe hang-report` names the process and task at fault. `hangs [--device] SCENARIO`, in the
// third step (process 1, rank 1, in its first forward of the step: F of stage 1, microbatch 0):
//  - killed: process 1 raises SIGKILL (it can write nothing; its live record stays);
//  - hangs:  process 1's layer sleeps; process 0 times out (options::timeout, 5 s) and ends the
//            job, whose launcher stops process 1 with SIGTERM (it writes where it stands);
//  - leaves: process 1 destroys its executor after two steps and ends; process 0 times out;
//  - throws: process 1's layer throws: the step fails on both, which write why, and the job ends.
// Where the launcher would not end a process, the executor's own deadline ends it. With --device,
// the same on the MPI executor's device path (mpi::device_executor on the stream simulator, one
// simulated GPU per process): the layer's fault happens where its host code issues the forward.
#include <ctpipe/mpi.hpp>
#include <ctpipe/mpi/device_executor.hpp>

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/mlp.hpp"
#include "support/sim_mlp.hpp"

namespace {

std::string scenario;
bool armed = false;

void fault() {
  if (!armed) return;
  std::fprintf(stderr, "ctpipe_mpi_hangs: process 1 %s in a forward\n", scenario.c_str());
  std::fflush(stderr);
  if (scenario == "killed") std::raise(SIGKILL);
  if (scenario == "hangs") std::this_thread::sleep_for(std::chrono::seconds(100));
  if (scenario == "throws") throw std::runtime_error("a layer's own error");
}

struct faulty : test::dense<test::batch, test::hidden, test::hidden> {
  void forward(const input_type& x, output_type& y) const {
    fault();
    dense::forward(x, y);
  }
};
using net = ctpipe::model<test::dense<test::batch, test::features, test::hidden>,
                          test::dense<test::batch, test::hidden, test::hidden>, faulty,
                          test::dense<test::batch, test::hidden, test::classes, ctpipe::layers::activation::none>>;

// The same on the simulated device.
using test::device::sim_dense;
struct faulty_device : sim_dense<test::batch, test::hidden, test::hidden> {
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    fault();
    sim_dense::forward(c, x, y);
  }
};
using device_net = ctpipe::model<sim_dense<test::batch, test::features, test::hidden>,
                                 sim_dense<test::batch, test::hidden, test::hidden>, faulty_device,
                                 sim_dense<test::batch, test::hidden, test::classes, ctpipe::layers::activation::none>>;

constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
constexpr auto stages = ctpipe::partition<net, 2>();
static_assert(stages.first[1] <= 2, "the faulty layer is on rank 1");
static_assert(ctpipe::partition<device_net, 2>().first[1] == stages.first[1]);
const ctpipe::mpi::options options{.timeout = std::chrono::seconds(5)};

// Five steps, process 1 faulting in the third (or leaving before it).
template <class Exec, class Data, class Update>
void run(Exec& exec, int process, const Data& d, Update update) {
  for (int step = 0; step < 5; ++step) {
    if (scenario == "leaves" && process == 1 && step == 2) {
      std::fprintf(stderr, "ctpipe_mpi_hangs: process 1 leaves after two steps\n");
      return;
    }
    armed = process == 1 && step == 2;
    exec.step(d.inputs, d.targets);
    update();
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const bool device = argc > 1 && std::string(argv[1]) == "--device";
  scenario = argc > 1 + device ? argv[1 + device] : "";
  if (scenario != "killed" && scenario != "hangs" && scenario != "leaves" && scenario != "throws") {
    std::fprintf(stderr, "usage: ctpipe_mpi_hangs [--device] killed|hangs|leaves|throws\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  const test::data_set d = test::make_data(8);
  try {
    if (device) {
      sim::world::get().reset(static_cast<unsigned>(3 + process), 1);
      device_net model = test::device::make_mlp<device_net>();
      test::device::sim_loss l;
      const test::device::device_data dd(d);
      ctpipe::mpi::basic_device_executor<table, device_net, stages, test::device::sim_loss, sim::backend> exec(
          model, l, 0, MPI_COMM_WORLD, options);
      run(exec, process, dd, [] {});
    } else {
      net model;
      std::uint64_t k = 1;
      ctpipe::for_each_layer(model, [&](auto& l) { l.init(k++); });
      test::loss l;
      ctpipe::mpi::executor<table, net, stages, test::loss> exec(model, l, MPI_COMM_WORLD, options);
      run(exec, process, d, [&] { ctpipe::sgd_step(model, 0.01); });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %d: %s\n", process, e.what());
    if (scenario != "throws") MPI_Abort(MPI_COMM_WORLD, 1);  // ends every process of the job
    MPI_Finalize();
    return 1;
  }
  if (scenario == "leaves" && process == 1) {
    MPI_Finalize();
    return 0;
  }
  std::fprintf(stderr, "process %d: all steps ran: the fault did not happen\n", process);
  MPI_Finalize();
  return 0;
}
