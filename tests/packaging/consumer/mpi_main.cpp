// A user's MPI program: builds against ctpipe::mpi (run it under mpirun).
#include <ctpipe/layers/dense.hpp>
#include <ctpipe/mpi.hpp>

#include <vector>

using layer = ctpipe::layers::dense<2, 4, 4>;
using net = ctpipe::model<layer, layer>;
using loss = ctpipe::layers::softmax_cross_entropy<2, 4>;
constexpr auto table = ctpipe::make_table<ctpipe::one_f_one_b(2, 4)>();
using executor = ctpipe::mpi::executor<table, net, ctpipe::partition<net, 2>(), loss>;
static_assert(ctpipe::mpi::place_of(1, 2, 1).rank == 1);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  net model;
  loss l;
  executor exec(model, l);
  const std::vector<net::input_type> inputs(4);
  const std::vector<loss::target_type> targets(4);
  exec.step(inputs, targets);
  MPI_Finalize();
  return 0;
}
