// The GPT example under mpirun: one process per pipeline rank and replica (ctpipe::mpi::executor).
// A step's 8 microbatches are shared among the replicas: 8 each at D = 1, 4 each at D = 2.
#include "train.hpp"

namespace gpt_example {
int train_mpi(const options& o, const corpus& c) {
  if (o.processes % o.ranks != 0) return -1;
  const int replicas = o.processes / o.ranks;
  const bool v = o.schedule == "zb-v";
  if (o.schedule != "1f1b" && !v) return -1;
  if (replicas == 1 && o.ranks == 2)
    return v ? train<ctpipe::zb_v(2, 8), true>(o, c) : train<ctpipe::one_f_one_b(2, 8), true>(o, c);
  if (replicas == 1 && o.ranks == 4 && !v) return train<ctpipe::one_f_one_b(4, 8), true>(o, c);
  if (replicas == 2 && o.ranks == 2)
    return v ? train<ctpipe::zb_v(2, 4), true>(o, c) : train<ctpipe::one_f_one_b(2, 4), true>(o, c);
  return -1;
}
}  // namespace gpt_example
