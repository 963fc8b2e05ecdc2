// A process killed (SIGKILL) in the middle of a step: run by expect_killed.sh, which checks that
// the job ends, non-zero, within its deadline. Process 1 kills itself in its third step; process 0
// waits on a message from it that never comes: MPI's launcher ends the job, and, where it would
// not, the executor's own deadline (options::timeout, 5 s here) ends process 0 with timeout_error.
#include <ctpipe/mpi.hpp>

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>

#include "support/mlp.hpp"

namespace {

bool kill_armed = false;

struct killing : test::dense<test::batch, test::hidden, test::hidden> {
  void forward(const input_type& x, output_type& y) const {
    if (kill_armed) {
      std::fprintf(stderr, "ctpipe_mpi_killed: process 1 raises SIGKILL in a forward\n");
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    dense::forward(x, y);
  }
};
using net = ctpipe::model<test::dense<test::batch, test::features, test::hidden>,
                          test::dense<test::batch, test::hidden, test::hidden>, killing,
                          test::dense<test::batch, test::hidden, test::classes, ctpipe::layers::activation::none>>;

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
  constexpr auto stages = ctpipe::partition<net, 2>();
  static_assert(stages.first[1] <= 2, "the killing layer is on rank 1");
  net model;
  std::uint64_t k = 1;
  ctpipe::for_each_layer(model, [&](auto& l) { l.init(k++); });
  test::loss l;
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  try {
    ctpipe::mpi::executor<table, net, stages, test::loss> exec(model, l, MPI_COMM_WORLD,
                                                               {.timeout = std::chrono::seconds(5)});
    const test::data_set d = test::make_data(8);
    for (int step = 0; step < 5; ++step) {
      kill_armed = process == 1 && step == 2;
      exec.step(d.inputs, d.targets);
      ctpipe::sgd_step(model, 0.01);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %d: %s\n", process, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // ends every process of the job
  }
  std::fprintf(stderr, "process %d: all steps ran: the kill did not happen\n", process);
  MPI_Finalize();
  return 0;
}
