// A job of two simulated processes on the NCCL stand-in (support/nccl_sim.hpp) that cannot finish
// its step, with the hang report on (CTPIPE_REPORT_DIR): run by tests/mpi/expect_hang.sh, which
// checks that the job ends within its deadline and that `ctpipe hang-report` names the process and
// task at fault. `ctpipe_nccl_hangs SCENARIO`, in the third step:
//  - leaves: process 1 destroys its executor after two steps; process 0's step times out
//    (options::timeout, 2 s), and its report says where its GPU stopped: the receive that waits
//    for process 1;
//  - throws: process 1's layer throws in its first forward (F of stage 1, microbatch 0): the step
//    fails on both, process 1 writes why, process 0 that it was stopped.
// (A killed process and a layer that hangs need a launcher to end the job: the stand-in runs every
// process in this one program, so those are tested under mpirun on the MPI executor, and on a GPU
// machine with real NCCL.)
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctpipe/nccl/executor.hpp>

#include "support/nccl_sim.hpp"
#include "support/sim_mlp.hpp"

namespace {

std::string scenario;
bool armed = false;

using test::batch, test::features, test::hidden, test::classes;
using test::device::sim_dense;
struct faulty_device : sim_dense<batch, hidden, hidden> {
  void forward(const ctpipe::cuda::context& c, const input_type& x, output_type& y) {
    if (armed && c.microbatch == 0) {
      std::fprintf(stderr, "ctpipe_nccl_hangs: process 1 %s in a forward\n", scenario.c_str());
      throw std::runtime_error("a layer's own error");
    }
    sim_dense::forward(c, x, y);
  }
};
using net = ctpipe::model<sim_dense<batch, features, hidden>, sim_dense<batch, hidden, hidden>, faulty_device,
                          sim_dense<batch, hidden, classes, ctpipe::layers::activation::none>>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 8)>();
using exec_t = ctpipe::nccl::basic_executor<table, net, ctpipe::partition<net, 2>(), test::device::sim_loss,
                                            sim::backend, sim::nccl::net>;
static_assert(ctpipe::partition<net, 2>().stage_of_layer(2) == 1, "the faulty layer is rank 1's");

}  // namespace

int main(int argc, char** argv) {
  scenario = argc > 1 ? argv[1] : "";
  if (scenario != "leaves" && scenario != "throws") {
    std::fprintf(stderr, "usage: ctpipe_nccl_hangs leaves|throws\n");
    return 2;
  }
  sim::world::get().reset(7, 2);
  sim::nccl::state::get().reset();
  const test::data_set d = test::make_data(8);
  const std::vector<sim::nccl::handle*> world = sim::nccl::make_world(2);
  std::vector<net> models;
  std::vector<test::device::sim_loss> losses(2);
  std::vector<std::unique_ptr<test::device::device_data>> data;
  std::vector<std::unique_ptr<exec_t>> exec;
  for (int q = 0; q < 2; ++q) {
    models.push_back(test::device::make_mlp<net>());
    data.push_back(std::make_unique<test::device::device_data>(d, q, q));
  }
  for (int q = 0; q < 2; ++q)
    exec.push_back(
        std::make_unique<exec_t>(models[static_cast<std::size_t>(q)], losses[static_cast<std::size_t>(q)],
                                 ctpipe::nccl::job<sim::nccl::net>{world[static_cast<std::size_t>(q)], q, 2, q},
                                 ctpipe::nccl::options{.timeout = std::chrono::seconds(2)}));
  try {
    for (int step = 0; step < 5; ++step) {
      if (scenario == "leaves" && step == 2) {
        std::fprintf(stderr, "ctpipe_nccl_hangs: process 1 leaves after two steps\n");
        exec[1].reset();
      }
      armed = scenario == "throws" && step == 2;
      for (int q = 0; q < 2; ++q)
        if (exec[static_cast<std::size_t>(q)])
          exec[static_cast<std::size_t>(q)]->enqueue(data[static_cast<std::size_t>(q)]->inputs,
                                                     data[static_cast<std::size_t>(q)]->targets);
      for (int q = 1; q >= 0; --q)  // (process 1's failure first: its own, then process 0's word of it)
        if (exec[static_cast<std::size_t>(q)]) {
          try {
            exec[static_cast<std::size_t>(q)]->wait();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "process %d: %s\n", q, e.what());
            if (q == 0) throw;
          }
        }
    }
  } catch (const std::exception&) {
    // (An executor whose communicators were aborted is left, as the library asks: its buffers may
    // still be in use by work that will never end. Reachable from here: LeakSanitizer counts no leak.)
    static auto* const left_behind = new std::vector<exec_t*>;
    for (auto& e : exec) left_behind->push_back(e.release());
    return 1;
  }
  std::fprintf(stderr, "all steps ran: the fault did not happen\n");
  return 0;
}
